#!/bin/sh
# Starts `llambda serve` on loopback and drives it with the openai npm client
# (tests/server/client.mjs), then checks the API key and a clean shutdown.
BUILD=${1:-build}
F=${LLAMBDA_FIXTURES:-../shared/fixtures}
L="$BUILD/llambda"
passed=0; failed=0
ok() { passed=$((passed + 1)); echo "PASS $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
if [ ! -d tests/server/node_modules/openai ]; then
    (cd tests/server && npm install --no-audit --no-fund >/dev/null 2>&1) || { echo "FAIL server: npm install of the openai client"; echo "0 passed, 1 failed"; exit 1; }
fi
# below the kernel's ephemeral range (32768 and up here), where a client socket of this very
# test could hold the port: one CI run's second server found its port taken and exited
port=$((20000 + $$ % 12000))
"$L" serve -m "$F/models/tiny-llama31-Q4_K_M.gguf" --port $port --parallel 4 -c 512 -t 2 2>"$BUILD/server.log" &
pid=$!
for i in $(seq 1 50); do curl -s "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break; sleep 0.1; done
BASE="http://127.0.0.1:$port" node tests/server/client.mjs > "$BUILD/server_client.out" 2>&1
cat "$BUILD/server_client.out"
p=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$BUILD/server_client.out")
f=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$BUILD/server_client.out")
passed=$((passed + ${p:-0})); failed=$((failed + ${f:-1}))
kill -TERM $pid; wait $pid; rc=$?
[ $rc -eq 0 ] && ok "server: shuts down cleanly on SIGTERM (exit 0, no sanitizer report)" || { bad "server: exit status $rc on SIGTERM"; tail -20 "$BUILD/server.log"; }

# --api-key: 401 without or with a wrong bearer key
port2=$((port + 1))
"$L" serve -m "$F/models/tiny-llama31-Q4_K_M.gguf" --port $port2 --api-key s3cret -c 128 2>"$BUILD/server2.log" &
pid2=$!
for i in $(seq 1 50); do curl -s "http://127.0.0.1:$port2/health" >/dev/null 2>&1 && break; sleep 0.1; done
body='{"messages":[{"role":"user","content":"hi"}],"max_tokens":1}'
a=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port2/v1/chat/completions" -d "$body")
b=$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer wrong' "http://127.0.0.1:$port2/v1/chat/completions" -d "$body")
c=$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer s3cret' "http://127.0.0.1:$port2/v1/chat/completions" -d "$body")
[ "$a$b$c" = "401401200" ] && ok "server: --api-key gives 401 without or with a wrong key, 200 with it" || { bad "server: api key codes $a $b $c"; tail -5 "$BUILD/server2.log"; }
kill -TERM $pid2; wait $pid2

# a full queue answers 503: one slot, no queue, the slot held by a long stream
port3=$((port + 2))
"$L" serve -m "$F/models/tiny-llama31-Q4_K_M.gguf" --port $port3 --parallel 1 --queue 0 -c 16384 2>/dev/null &
pid3=$!
for i in $(seq 1 50); do curl -s "http://127.0.0.1:$port3/health" >/dev/null 2>&1 && break; sleep 0.1; done
curl -s -N "http://127.0.0.1:$port3/v1/chat/completions" -d '{"messages":[{"role":"user","content":"hi"}],"max_tokens":16000,"stream":true,"ignore_eos":true}' >"$BUILD/stream.out" &
cpid=$!
# wait until the stream holds the slot (its first event has arrived)
for i in $(seq 1 100); do [ -s "$BUILD/stream.out" ] && break; sleep 0.05; done
d=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port3/v1/chat/completions" -d "$body")
# (the stream is long enough to outlast this on fast kernels: 400 tokens of the tiny model
# once finished first; the client is stopped rather than waited for)
kill $cpid 2>/dev/null; wait $cpid 2>/dev/null
[ "$d" = "503" ] && ok "server: a full queue answers 503" || bad "server: full queue gave $d"
kill -TERM $pid3; wait $pid3
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
