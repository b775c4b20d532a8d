#!/usr/bin/env python3
"""An independent client of `inferscale scaler`: grpcio, with the stubs grpcio-tools compiles
from crates/scaler/proto/externalscaler.proto at run time (nothing generated is kept).

Usage: keda_client.py PROTO_DIR ADDRESS METADATA_JSON

Calls GetMetricSpec, GetMetrics and IsActive as KEDA does for an `external` trigger and
prints one JSON object: {"spec": [...], "metrics": [...] | {"code", "message"}, "active": ...}.
Errors are reported by gRPC status code name, so the caller can tell Unavailable from
InvalidArgument.
"""

import json
import os
import sys
import tempfile


def compile_stubs(proto_dir, out_dir):
    from grpc_tools import protoc
    import grpc_tools

    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    rc = protoc.main([
        "protoc",
        "-I" + proto_dir,
        "-I" + include,
        "--python_out=" + out_dir,
        "--grpc_python_out=" + out_dir,
        os.path.join(proto_dir, "externalscaler.proto"),
    ])
    if rc != 0:
        sys.exit("protoc failed on externalscaler.proto (exit %d)" % rc)
    sys.path.insert(0, out_dir)


def call(fn):
    import grpc

    try:
        return fn(), None
    except grpc.RpcError as e:
        return None, {"code": e.code().name, "message": e.details()}


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    proto_dir, address, metadata = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    with tempfile.TemporaryDirectory() as out:
        compile_stubs(proto_dir, out)
        import grpc
        import externalscaler_pb2 as pb
        import externalscaler_pb2_grpc as pb_grpc

        with grpc.insecure_channel(address) as channel:
            stub = pb_grpc.ExternalScalerStub(channel)
            ref = pb.ScaledObjectRef(name="vllm", namespace="llm", scalerMetadata=metadata)
            result = {}
            spec, err = call(lambda: stub.GetMetricSpec(ref, timeout=10))
            result["spec"] = err or [
                {"metricName": s.metricName, "targetSize": s.targetSize,
                 "targetSizeFloat": s.targetSizeFloat}
                for s in spec.metricSpecs
            ]
            name = spec.metricSpecs[0].metricName if spec else ""
            req = pb.GetMetricsRequest(scaledObjectRef=ref, metricName=name)
            got, err = call(lambda: stub.GetMetrics(req, timeout=10))
            result["metrics"] = err or [
                {"metricName": v.metricName, "metricValue": v.metricValue,
                 "metricValueFloat": v.metricValueFloat}
                for v in got.metricValues
            ]
            active, err = call(lambda: stub.IsActive(ref, timeout=10))
            result["active"] = err or active.result
            print(json.dumps(result))


if __name__ == "__main__":
    main()
