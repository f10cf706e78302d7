// Drives a running `llambda serve` (BASE = http://127.0.0.1:PORT) with the openai client
// and raw HTTP. Prints PASS/FAIL lines and "N passed, N failed".
import OpenAI from 'openai';
import net from 'node:net';

const BASE = process.env.BASE;
const client = new OpenAI({ baseURL: BASE + '/v1', apiKey: 'unused' });
let passed = 0, failed = 0;
async function test(name, fn) {
  try { await fn(); passed++; console.log('PASS ' + name); }
  catch (e) { failed++; console.log('FAIL ' + name + '\n  ' + (e && e.stack ? e.stack.split('\n').slice(0, 3).join('\n  ') : e)); }
}
function assert(c, msg) { if (!c) throw new Error(msg); }

const msgs = (u) => [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: u }];

async function chat(u, seed, max_tokens = 12) {
  const r = await client.chat.completions.create({ model: 'x', messages: msgs(u), seed, temperature: 0.9, max_tokens });
  return r;
}
async function chatStream(u, seed, max_tokens = 12) {
  const s = await client.chat.completions.create({ model: 'x', messages: msgs(u), seed, temperature: 0.9, max_tokens, stream: true,
                                                   stream_options: { include_usage: true } });
  let text = '', finish = null, usage = null, role = null;
  for await (const ch of s) {
    if (ch.usage) usage = ch.usage;
    for (const c of ch.choices) {
      if (c.delta.role) role = c.delta.role;
      if (c.delta.content) text += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { text, finish, usage, role };
}

// raw HTTP: returns {status, body}
async function raw(method, path, body, headers = {}) {
  const r = await fetch(BASE + path, { method, body, headers: { 'Content-Type': 'application/json', ...headers } });
  return { status: r.status, body: await r.text() };
}
// a raw socket request, for bodies fetch will not send (truncated, invalid UTF-8, slow)
function rawSocket(bytes, { slowMs = 0, closeEarly = false } = {}) {
  const u = new URL(BASE);
  return new Promise((resolve) => {
    const s = net.connect(+u.port, u.hostname);
    let out = '';
    s.on('data', d => { out += d; });
    s.on('close', () => resolve(out));
    s.on('error', () => resolve(out));
    s.on('connect', async () => {
      if (slowMs) { for (const b of bytes) { s.write(Buffer.from([b])); await new Promise(r => setTimeout(r, slowMs)); } }
      else s.write(bytes);
      if (closeEarly) s.destroy(); else s.end();
    });
    setTimeout(() => { s.destroy(); resolve(out); }, 8000);
  });
}
const post = (body) => Buffer.concat([Buffer.from(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`), body]);

await test('server: /health and /v1/models through the openai client', async () => {
  const h = await raw('GET', '/health');
  assert(h.status === 200 && JSON.parse(h.body).status === 'ok', 'health');
  const models = await client.models.list();
  assert(models.data.length === 1 && models.data[0].object === 'model', 'models list');
});

let ref;
await test('server: non-streaming chat completion (message, finish_reason, usage)', async () => {
  ref = await chat('Hello there', 42);
  const c = ref.choices[0];
  assert(ref.object === 'chat.completion' && c.message.role === 'assistant' && typeof c.message.content === 'string', 'shape');
  assert(c.finish_reason === 'length' || c.finish_reason === 'stop', 'finish_reason ' + c.finish_reason);
  assert(ref.usage.prompt_tokens > 5 && ref.usage.completion_tokens <= 12 &&
         ref.usage.total_tokens === ref.usage.prompt_tokens + ref.usage.completion_tokens, 'usage');
  const again = await chat('Hello there', 42);
  assert(again.choices[0].message.content === c.message.content, 'same seed, same text');
});

await test('server: streaming chat gives the same text as non-streaming, then [DONE]', async () => {
  const s = await chatStream('Hello there', 42);
  assert(s.role === 'assistant', 'role delta');
  assert(s.text === ref.choices[0].message.content, `streamed "${s.text}" vs "${ref.choices[0].message.content}"`);
  assert(s.finish === ref.choices[0].finish_reason, 'finish reason');
  assert(s.usage && s.usage.completion_tokens === ref.usage.completion_tokens, 'usage in the final chunk');
  const r = await raw('POST', '/v1/chat/completions', JSON.stringify({ messages: msgs('Hi'), max_tokens: 2, stream: true }));
  assert(r.body.trimEnd().endsWith('data: [DONE]'), 'ends with data: [DONE]');
});

await test('server: 8 concurrent streaming requests on 4 slots match sequential runs', async () => {
  const prompts = Array.from({ length: 8 }, (_, i) => [`Tell me about ${i} cats`, 100 + i]);
  const seq = [];
  for (const [p, seed] of prompts) seq.push(await chatStream(p, seed, 16));
  const par = await Promise.all(prompts.map(([p, seed]) => chatStream(p, seed, 16)));
  for (let i = 0; i < 8; i++) assert(par[i].text === seq[i].text && par[i].finish === seq[i].finish, `request ${i} differs`);
  assert(new Set(seq.map(s => s.text)).size > 1, 'outputs should not all be identical');
});

await test('server: /v1/completions with a raw prompt, stop strings and max_tokens', async () => {
  const r = await client.completions.create({ model: 'x', prompt: 'Once upon a time', max_tokens: 10, temperature: 0 });
  assert(r.object === 'text_completion' && typeof r.choices[0].text === 'string', 'shape');
  const full = r.choices[0].text;
  if (full.length > 3) {
    const stop = full.slice(2, 4);
    const s = await client.completions.create({ model: 'x', prompt: 'Once upon a time', max_tokens: 10, temperature: 0, stop: [stop] });
    assert(!s.choices[0].text.includes(stop) && s.choices[0].finish_reason === 'stop', 'stop string cut the text');
  }
});

await test('server: error statuses (400 JSON and types, 404, 405, 413, prompt too long)', async () => {
  const cases = [
    ['POST', '/v1/chat/completions', '{"messages": [', 400],
    ['POST', '/v1/chat/completions', JSON.stringify({ messages: msgs('x'), temperature: 'hot' }), 400],
    ['POST', '/v1/chat/completions', JSON.stringify({ messages: 'hello' }), 400],
    ['POST', '/v1/chat/completions', JSON.stringify({ messages: [{ role: 'wizard', content: 'x' }] }), 400],
    ['POST', '/v1/chat/completions', JSON.stringify({ messages: [{ role: 'user', content: 5 }] }), 400],
    ['POST', '/v1/chat/completions', JSON.stringify({ messages: msgs('x'), max_tokens: -3 }), 400],
    ['POST', '/v1/chat/completions', JSON.stringify({ messages: msgs('x'), stop: [1, 2] }), 400],
    ['POST', '/v1/completions', JSON.stringify({ prompt: 17 }), 400],
    ['POST', '/v1/completions', JSON.stringify({ prompt: 'word '.repeat(3000) }), 400],
    ['GET', '/v2/anything', undefined, 404],
    ['GET', '/v1/chat/completions', undefined, 405],
    ['POST', '/health', '{}', 405],
    ['POST', '/v1/chat/completions', 'x'.repeat((1 << 20) + 10), 413],
  ];
  for (const [m, p, b, want] of cases) {
    const r = await raw(m, p, b);
    assert(r.status === want, `${m} ${p} ${String(b).slice(0, 40)}: ${r.status}, want ${want}`);
    const e = JSON.parse(r.body).error;
    assert(e && typeof e.message === 'string' && e.message.length > 0, 'OpenAI-style error body');
  }
});

await test('server: malformed corpus (nesting, huge numbers, invalid UTF-8, truncated and slow bodies)', async () => {
  const bodies = [
    Buffer.from('['.repeat(5000)), Buffer.from('{"messages":' + '['.repeat(2000) + ']'.repeat(2000) + '}'),
    Buffer.from('{"messages":[{"role":"user","content":"hi"}],"max_tokens":1e999,"temperature":-1e308}'),
    Buffer.from('{"messages":[{"role":"user","content":"hi"}],"seed":123456789012345678901234567890}'),
    Buffer.concat([Buffer.from('{"messages":[{"role":"user","content":"'), Buffer.from([0xff, 0xc3, 0x28, 0xe2, 0x82]), Buffer.from('"}],"max_tokens":2}')]),
    Buffer.from('{"messages":[{"role":"user","content":"\\ud800 lone surrogate"}],"max_tokens":2}'),
    Buffer.from('\x00\x01\x02 not json at all'), Buffer.from('null'), Buffer.from('"a string"'), Buffer.from('{}'),
  ];
  for (const b of bodies) {
    const out = await rawSocket(post(b));
    assert(/^HTTP\/1\.[01] (200|400)/.test(out), 'unexpected answer: ' + out.slice(0, 60));
  }
  // a body shorter than its Content-Length, then a hang-up; and a slow trickle
  await rawSocket(Buffer.from('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{"messages":'), { closeEarly: true });
  await rawSocket(post(Buffer.from('{"messages":[{"role":"user","content":"slow"}],"max_tokens":1}')), { slowMs: 5 });
  await rawSocket(Buffer.from('GARBAGE\r\n\r\n'));
  const h = await raw('GET', '/health');
  assert(h.status === 200, 'server still answering');
  const r = await chat('still alive?', 1, 2);
  assert(r.choices.length === 1, 'still generating');
});

await test('server: a client that disconnects mid-stream frees its slot', async () => {
  // saturate all slots with long streams, abort them after the first chunk
  const ctrls = [];
  const starts = [];
  for (let i = 0; i < 4; i++) {
    const ac = new AbortController();
    ctrls.push(ac);
    starts.push((async () => {
      const r = await fetch(BASE + '/v1/chat/completions', { method: 'POST', signal: ac.signal,
        body: JSON.stringify({ messages: msgs('go on ' + i), max_tokens: 200, stream: true }) });
      const rd = r.body.getReader();
      await rd.read();
      ac.abort();
    })().catch(() => {}));
  }
  await Promise.all(starts);
  const t0 = Date.now();
  const r = await chat('after the aborts', 3, 2);
  assert(r.choices.length === 1 && Date.now() - t0 < 15000, 'a new request got a slot');
});

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
