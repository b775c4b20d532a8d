# Sourced by the load-generator benches: starts a tiny nginx (Debian's `nginx`) that answers
# every POST with a fixed non-streaming completion and GET /v1/models with one model, pinned to
# CPU 0 on 127.0.0.1:$port, configured under $dir; stops it when the calling script exits.
# Expects `dir` and `port` set; leaves `ngx` (its pid).
mkdir -p "$dir"
cat > "$dir/nginx.conf" <<CONF
worker_processes 1;
daemon off;
error_log $PWD/$dir/nginx-error.log;
pid $PWD/$dir/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  keepalive_timeout 120s;
  client_body_temp_path $PWD/$dir/body;
  server {
    listen 127.0.0.1:$port reuseport;
    default_type application/json;
    location = /v1/models { return 200 '{"object":"list","data":[{"id":"m","object":"model"}]}'; }
    location / { return 200 '{"id":"c","object":"text_completion","model":"m","choices":[{"index":0,"text":" ok","finish_reason":"length"}],"usage":{"prompt_tokens":34,"completion_tokens":1,"total_tokens":35}}'; }
  }
}
CONF
taskset -c 0 nginx -c "$PWD/$dir/nginx.conf" &
ngx=$!
trap 'kill $ngx 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do
  curl -sf -o /dev/null "http://127.0.0.1:$port/v1/models" && break
  sleep 0.1
done
cat > "$dir/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body   = '{"model":"m","prompt":"hello","max_tokens":16}'
wrk.headers["Content-Type"] = "application/json"
LUA
