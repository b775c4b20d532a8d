#!/usr/bin/env python3
"""Builds one of the Kubernetes-native schemas in crates/manifests/schemas/ from the
JSON-Schema files of the PyPI package kubernetes-validate (generated from Kubernetes'
OpenAPI spec, one folder per Kubernetes version):

    pip download --no-deps kubernetes-validate==1.37.0
    unzip -q kubernetes_validate-1.37.0-py3-none-any.whl 'kubernetes_validate/kubernetes-json-schema/v1.37.0-local-strict/*'
    python3 scripts/schemas/k8s-native.py \
        kubernetes_validate/kubernetes-json-schema/v1.37.0-local-strict job-batch-v1.json \
        > crates/manifests/schemas/Job.batch.v1.openapi.json

What it writes is the OpenAPI v3 subset the validator reads (crates/manifests/src/validate.rs):
`type: [T, "null"]` becomes `type: T, nullable: true`, descriptions and the x-kubernetes
annotations the validator does not read are dropped, and every `$ref` points into the file's
own `$defs`, which hold exactly the definitions the object reaches.
"""

import json
import sys

KEEP_X = {"x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields"}
DROP = {"description", "$schema", "$id", "default", "format"}


def ref_name(ref):
    return ref.rsplit("/", 1)[-1]


def convert(v, reached):
    if isinstance(v, list):
        return [convert(x, reached) for x in v]
    if not isinstance(v, dict):
        return v
    out = {}
    for k, x in v.items():
        if k in DROP and not isinstance(x, dict):
            # `format` is kept where the validator reads it (int32 bounds).
            if k == "format" and x == "int32":
                out[k] = x
            continue
        if k.startswith("x-kubernetes-") and k not in KEEP_X:
            continue
        if k == "$ref":
            name = ref_name(x)
            reached.add(name)
            out[k] = "#/$defs/" + name
        elif k == "type" and isinstance(x, list):
            types = [t for t in x if t != "null"]
            if len(types) == 1:
                out["type"] = types[0]
            if "null" in x:
                out["nullable"] = True
        elif k == "properties":
            out[k] = {name: convert(s, reached) for name, s in x.items()}
        else:
            out[k] = convert(x, reached)
    return out


def main():
    folder, top = sys.argv[1], sys.argv[2]
    with open(f"{folder}/{top}") as f:
        root_in = json.load(f)
    with open(f"{folder}/_definitions.json") as f:
        defs_in = json.load(f)["$defs"]
    reached = set()
    root = convert(root_in, reached)
    defs = {}
    todo = list(reached)
    while todo:
        name = todo.pop()
        if name in defs:
            continue
        found = set()
        defs[name] = convert(defs_in[name], found)
        todo.extend(found - defs.keys())
    root["$defs"] = dict(sorted(defs.items()))
    json.dump(root, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")


main()
