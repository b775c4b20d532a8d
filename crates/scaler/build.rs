//! Generates the Rust side of `proto/externalscaler.proto`: one struct per message with its
//! protobuf encoding, and per service a server trait, a dispatcher and a client.
//!
//! The compiler reads the proto3 subset a scaler contract needs (scalar fields, strings,
//! singular and repeated messages, `map<string, string>`, unary and server-streaming RPCs)
//! and refuses anything else with the file's line, so a contract that grows past it fails the
//! build rather than being half-understood. It is a build script, not a dependency: no
//! `protoc`, nothing to install on a fresh machine.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

const PROTO: &str = "proto/externalscaler.proto";

fn main() {
    println!("cargo::rerun-if-changed={PROTO}");
    println!("cargo::rerun-if-changed=build.rs");
    if let Err(e) = run() {
        eprintln!("error: {PROTO}: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let text = std::fs::read_to_string(PROTO).map_err(|e| e.to_string())?;
    let file = parse(&text)?;
    let code = generate(&file)?;
    let out = PathBuf::from(std::env::var("OUT_DIR").map_err(|e| e.to_string())?);
    std::fs::write(out.join("externalscaler.rs"), code).map_err(|e| e.to_string())
}

#[derive(Debug)]
struct File {
    package: String,
    messages: Vec<Message>,
    services: Vec<Service>,
}

#[derive(Debug)]
struct Message {
    name: String,
    fields: Vec<Field>,
}

#[derive(Debug)]
struct Field {
    name: String,
    number: u32,
    kind: Kind,
    repeated: bool,
    line: usize,
}

#[derive(Debug, Clone)]
enum Kind {
    Scalar(&'static str),
    Message(String),
    StringMap,
}

#[derive(Debug)]
struct Service {
    name: String,
    rpcs: Vec<Rpc>,
}

#[derive(Debug)]
struct Rpc {
    name: String,
    input: String,
    output: String,
    server_streaming: bool,
}

/// The proto3 scalars supported, each with its Rust type.
const SCALARS: [(&str, &str); 9] = [
    ("string", "String"),
    ("bytes", "Vec<u8>"),
    ("bool", "bool"),
    ("int32", "i32"),
    ("int64", "i64"),
    ("uint32", "u32"),
    ("uint64", "u64"),
    ("double", "f64"),
    ("float", "f32"),
];

struct Tokens {
    toks: Vec<(String, usize)>,
    at: usize,
}

impl Tokens {
    fn new(text: &str) -> Result<Tokens, String> {
        let mut toks = Vec::new();
        for (n, raw) in text.lines().enumerate() {
            let line = raw.split("//").next().unwrap_or("");
            let mut chars = line.char_indices().peekable();
            while let Some((i, c)) = chars.next() {
                if c.is_whitespace() {
                    continue;
                }
                if c == '"' {
                    let rest = &line[i + 1..];
                    let end = rest
                        .find('"')
                        .ok_or_else(|| format!("line {}: unterminated string", n + 1))?;
                    toks.push((format!("\"{}\"", &rest[..end]), n + 1));
                    for _ in 0..=rest[..end].chars().count() {
                        chars.next();
                    }
                } else if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
                    let mut end = i + c.len_utf8();
                    while let Some(&(j, d)) = chars.peek() {
                        if d.is_ascii_alphanumeric() || d == '_' || d == '.' {
                            end = j + d.len_utf8();
                            chars.next();
                        } else {
                            break;
                        }
                    }
                    toks.push((line[i..end].to_owned(), n + 1));
                } else if "{}()<>;=,".contains(c) {
                    toks.push((c.to_string(), n + 1));
                } else {
                    return Err(format!("line {}: unexpected {c:?}", n + 1));
                }
            }
        }
        if text.contains("/*") {
            return Err("block comments are not supported; use //".into());
        }
        Ok(Tokens { toks, at: 0 })
    }

    fn line(&self) -> usize {
        self.toks
            .get(self.at)
            .or(self.toks.last())
            .map_or(0, |t| t.1)
    }

    fn next(&mut self) -> Result<String, String> {
        let t = self
            .toks
            .get(self.at)
            .ok_or_else(|| "unexpected end of file".to_owned())?;
        self.at += 1;
        Ok(t.0.clone())
    }

    fn peek(&self) -> Option<&str> {
        self.toks.get(self.at).map(|t| t.0.as_str())
    }

    fn expect(&mut self, want: &str) -> Result<(), String> {
        let line = self.line();
        let got = self.next()?;
        if got == want {
            Ok(())
        } else {
            Err(format!("line {line}: expected {want:?}, found {got:?}"))
        }
    }

    fn ident(&mut self) -> Result<String, String> {
        let line = self.line();
        let got = self.next()?;
        if got.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) {
            Ok(got)
        } else {
            Err(format!("line {line}: expected a name, found {got:?}"))
        }
    }

    /// Skips an RPC's options: `{}` or `;`.
    fn rpc_end(&mut self) -> Result<(), String> {
        if self.peek() == Some(";") {
            return self.expect(";");
        }
        self.expect("{")?;
        self.expect("}")
    }
}

fn parse(text: &str) -> Result<File, String> {
    let mut t = Tokens::new(text)?;
    let mut file = File {
        package: String::new(),
        messages: Vec::new(),
        services: Vec::new(),
    };
    while t.peek().is_some() {
        let line = t.line();
        match t.next()?.as_str() {
            "syntax" => {
                t.expect("=")?;
                let v = t.next()?;
                if v != "\"proto3\"" {
                    return Err(format!("line {line}: only proto3 is supported, found {v}"));
                }
                t.expect(";")?;
            }
            "package" => {
                file.package = t.ident()?;
                t.expect(";")?;
            }
            "option" => {
                // File options (go_package, …) do not change the Rust side.
                while t.next()? != ";" {}
            }
            "message" => file.messages.push(message(&mut t)?),
            "service" => file.services.push(service(&mut t)?),
            other => return Err(format!("line {line}: unsupported statement {other:?}")),
        }
    }
    if file.package.is_empty() {
        return Err("no package statement".into());
    }
    Ok(file)
}

fn message(t: &mut Tokens) -> Result<Message, String> {
    let name = t.ident()?;
    t.expect("{")?;
    let mut fields = Vec::new();
    while t.peek() != Some("}") {
        let line = t.line();
        let mut repeated = false;
        let mut ty = t.ident()?;
        if ty == "repeated" {
            repeated = true;
            ty = t.ident()?;
        }
        let kind = if ty == "map" {
            t.expect("<")?;
            let k = t.ident()?;
            t.expect(",")?;
            let v = t.ident()?;
            t.expect(">")?;
            if (k.as_str(), v.as_str()) != ("string", "string") {
                return Err(format!(
                    "line {line}: only map<string, string> is supported, found map<{k}, {v}>"
                ));
            }
            Kind::StringMap
        } else if let Some(&(p, _)) = SCALARS.iter().find(|s| s.0 == ty) {
            if repeated {
                return Err(format!(
                    "line {line}: repeated scalars are not supported ({ty})"
                ));
            }
            Kind::Scalar(p)
        } else if ["optional", "oneof", "enum", "message", "reserved"].contains(&ty.as_str()) {
            return Err(format!("line {line}: {ty:?} is not supported"));
        } else {
            Kind::Message(ty)
        };
        let name = t.ident()?;
        t.expect("=")?;
        let n = t.next()?;
        let number: u32 = n
            .parse()
            .ok()
            .filter(|&n| (1..=536_870_911).contains(&n) && !(19_000..=19_999).contains(&n))
            .ok_or_else(|| format!("line {line}: bad field number {n:?}"))?;
        t.expect(";")?;
        if fields.iter().any(|f: &Field| f.number == number) {
            return Err(format!("line {line}: field number {number} used twice"));
        }
        fields.push(Field {
            name,
            number,
            kind,
            repeated,
            line,
        });
    }
    t.expect("}")?;
    Ok(Message { name, fields })
}

fn service(t: &mut Tokens) -> Result<Service, String> {
    let name = t.ident()?;
    t.expect("{")?;
    let mut rpcs = Vec::new();
    while t.peek() != Some("}") {
        t.expect("rpc")?;
        let name = t.ident()?;
        t.expect("(")?;
        let line = t.line();
        let input = t.ident()?;
        if input == "stream" {
            return Err(format!("line {line}: client streaming is not supported"));
        }
        t.expect(")")?;
        t.expect("returns")?;
        t.expect("(")?;
        let mut output = t.ident()?;
        let server_streaming = output == "stream";
        if server_streaming {
            output = t.ident()?;
        }
        t.expect(")")?;
        t.rpc_end()?;
        rpcs.push(Rpc {
            name,
            input,
            output,
            server_streaming,
        });
    }
    t.expect("}")?;
    Ok(Service { name, rpcs })
}

/// `metricSpecs` → `metric_specs`, `GetMetrics` → `get_metrics`.
fn snake(name: &str) -> String {
    let mut s = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                s.push('_');
            }
            s.push(c.to_ascii_lowercase());
        } else {
            s.push(c);
        }
    }
    s
}

fn rust_type(f: &Field) -> String {
    match (&f.kind, f.repeated) {
        (Kind::Scalar(p), _) => SCALARS
            .iter()
            .find(|s| s.0 == *p)
            .map_or("()", |s| s.1)
            .to_owned(),
        (Kind::Message(m), true) => format!("Vec<{m}>"),
        (Kind::Message(m), false) => format!("Option<{m}>"),
        (Kind::StringMap, _) => "BTreeMap<String, String>".to_owned(),
    }
}

fn generate(file: &File) -> Result<String, String> {
    let names: BTreeMap<&str, &Message> =
        file.messages.iter().map(|m| (m.name.as_str(), m)).collect();
    let mut o = String::new();
    let w = &mut o;
    let _ = writeln!(
        w,
        "// Generated by crates/scaler/build.rs from {PROTO}; do not edit.\n"
    );
    let _ = writeln!(w, "use std::collections::BTreeMap;\n");
    let _ = writeln!(
        w,
        "use crate::grpc::wire::{{DecodeError, Reader, WireType, Writer}};"
    );
    let _ = writeln!(w, "use crate::grpc::{{Message, Reply, Service, Status}};\n");
    for m in &file.messages {
        for f in &m.fields {
            if let Kind::Message(t) = &f.kind
                && !names.contains_key(t.as_str())
            {
                return Err(format!("line {}: unknown message type {t:?}", f.line));
            }
        }
        message_code(w, m);
    }
    for s in &file.services {
        for r in &s.rpcs {
            for t in [&r.input, &r.output] {
                if !names.contains_key(t.as_str()) {
                    return Err(format!("rpc {}: unknown message type {t:?}", r.name));
                }
            }
        }
        service_code(w, &file.package, s);
    }
    Ok(o)
}

fn message_code(w: &mut String, m: &Message) {
    let _ = writeln!(w, "/// The protobuf message `{}`.", m.name);
    let _ = writeln!(w, "#[derive(Debug, Clone, PartialEq, Default)]");
    let _ = writeln!(w, "pub struct {} {{", m.name);
    for f in &m.fields {
        let _ = writeln!(w, "    /// Field `{}` = {}.", f.name, f.number);
        let _ = writeln!(w, "    pub {}: {},", snake(&f.name), rust_type(f));
    }
    let _ = writeln!(w, "}}\n");
    let _ = writeln!(w, "impl Message for {} {{", m.name);
    let _ = writeln!(w, "    fn encode(&self, w: &mut Writer) {{");
    for f in &m.fields {
        let (n, field) = (f.number, snake(&f.name));
        match (&f.kind, f.repeated) {
            (Kind::Scalar(p), _) => {
                let _ = writeln!(w, "        w.{p}({n}, &self.{field});");
            }
            (Kind::Message(_), true) => {
                let _ = writeln!(w, "        for m in &self.{field} {{ w.message({n}, m); }}");
            }
            (Kind::Message(_), false) => {
                let _ = writeln!(
                    w,
                    "        if let Some(m) = &self.{field} {{ w.message({n}, m); }}"
                );
            }
            (Kind::StringMap, _) => {
                let _ = writeln!(w, "        w.string_map({n}, &self.{field});");
            }
        }
    }
    let _ = writeln!(w, "    }}\n");
    let _ = writeln!(
        w,
        "    fn merge_field(&mut self, number: u32, wire: WireType, r: &mut Reader<'_>) -> Result<(), DecodeError> {{"
    );
    let _ = writeln!(w, "        match number {{");
    for f in &m.fields {
        let (n, field) = (f.number, snake(&f.name));
        let _ = match (&f.kind, f.repeated) {
            (Kind::Scalar(p), _) => {
                let read = if *p == "bytes" { "to_vec" } else { p };
                writeln!(w, "            {n} => self.{field} = r.{read}(wire)?,")
            }
            (Kind::Message(t), true) => writeln!(
                w,
                "            {n} => self.{field}.push({t}::decode(r.bytes(wire)?)?),"
            ),
            (Kind::Message(_), false) => writeln!(
                w,
                "            {n} => self.{field}.get_or_insert_with(Default::default).merge(r.bytes(wire)?)?,"
            ),
            (Kind::StringMap, _) => writeln!(
                w,
                "            {n} => {{ let (k, v) = r.string_entry(wire)?; self.{field}.insert(k, v); }}"
            ),
        };
    }
    let _ = writeln!(w, "            _ => r.skip(wire)?,");
    let _ = writeln!(w, "        }}");
    let _ = writeln!(w, "        Ok(())");
    let _ = writeln!(w, "    }}");
    let _ = writeln!(w, "}}\n");
}

fn service_code(w: &mut String, package: &str, s: &Service) {
    let full = format!("{package}.{}", s.name);
    let module = snake(&s.name);
    let _ = writeln!(
        w,
        "/// The gRPC service `{full}`: server trait, dispatcher and client."
    );
    let _ = writeln!(w, "pub mod {module} {{");
    let _ = writeln!(w, "    use super::*;\n");
    let _ = writeln!(
        w,
        "    /// The service's full name, the first part of each method's path."
    );
    let _ = writeln!(w, "    pub const NAME: &str = \"{full}\";\n");
    let _ = writeln!(w, "    /// What a server of `{full}` implements.");
    let _ = writeln!(w, "    pub trait Server: Send + Sync + 'static {{");
    for r in &s.rpcs {
        let out = if r.server_streaming {
            format!("crate::grpc::ServerStream<{}>", r.output)
        } else {
            r.output.clone()
        };
        let _ = writeln!(w, "        /// `{}`.", r.name);
        let _ = writeln!(
            w,
            "        fn {}(&self, request: {}) -> impl std::future::Future<Output = Result<{out}, Status>> + Send;",
            snake(&r.name),
            r.input
        );
    }
    let _ = writeln!(w, "    }}\n");
    let _ = writeln!(w, "    /// Routes `{full}`'s methods to a [`Server`].");
    let _ = writeln!(w, "    #[derive(Debug)]");
    let _ = writeln!(w, "    pub struct Routes<S>(pub std::sync::Arc<S>);\n");
    let _ = writeln!(w, "    impl<S: Server> Service for Routes<S> {{");
    let _ = writeln!(w, "        fn name(&self) -> &'static str {{ NAME }}\n");
    let _ = writeln!(
        w,
        "        fn call(&self, method: &str, body: bytes::Bytes) -> std::pin::Pin<Box<dyn std::future::Future<Output = Reply> + Send>> {{"
    );
    let _ = writeln!(
        w,
        "            let server = std::sync::Arc::clone(&self.0);"
    );
    let _ = writeln!(w, "            match method {{");
    for r in &s.rpcs {
        let reply = if r.server_streaming {
            "Reply::stream"
        } else {
            "Reply::unary"
        };
        let _ = writeln!(
            w,
            "                \"{}\" => Box::pin(async move {{ match {}::decode(&body) {{ Ok(q) => {reply}(server.{}(q).await), Err(e) => Reply::Unary(Err(Status::invalid_argument(format!(\"{}: {{e}}\")))) }} }}),",
            r.name,
            r.input,
            snake(&r.name),
            r.input
        );
    }
    let _ = writeln!(
        w,
        "                other => {{ let m = format!(\"{full} has no method {{other:?}}\"); Box::pin(async move {{ Reply::Unary(Err(Status::unimplemented(m))) }}) }}"
    );
    let _ = writeln!(w, "            }}");
    let _ = writeln!(w, "        }}");
    let _ = writeln!(w, "    }}\n");
    let _ = writeln!(
        w,
        "    /// A client of `{full}` over a [`crate::grpc::Channel`]."
    );
    let _ = writeln!(w, "    #[derive(Debug, Clone)]");
    let _ = writeln!(w, "    pub struct Client {{");
    let _ = writeln!(w, "        channel: crate::grpc::Channel,");
    let _ = writeln!(w, "    }}\n");
    let _ = writeln!(w, "    impl Client {{");
    let _ = writeln!(w, "        /// A client on `channel`.");
    let _ = writeln!(
        w,
        "        pub fn new(channel: crate::grpc::Channel) -> Client {{ Client {{ channel }} }}\n"
    );
    for r in &s.rpcs {
        let _ = writeln!(w, "        /// Calls `{}`.", r.name);
        if r.server_streaming {
            let _ = writeln!(
                w,
                "        pub async fn {}(&self, request: &{}) -> Result<crate::grpc::Streaming<{}>, Status> {{ self.channel.server_streaming(\"/{full}/{}\", request).await }}",
                snake(&r.name),
                r.input,
                r.output,
                r.name
            );
        } else {
            let _ = writeln!(
                w,
                "        pub async fn {}(&self, request: &{}) -> Result<{}, Status> {{ self.channel.unary(\"/{full}/{}\", request).await }}",
                snake(&r.name),
                r.input,
                r.output,
                r.name
            );
        }
    }
    let _ = writeln!(w, "    }}");
    let _ = writeln!(w, "}}\n");
}
