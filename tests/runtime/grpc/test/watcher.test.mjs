// agentbox runtime --grpc-port's watcher.v1.FileWatcherService (sandboxd
// v1.0.12's WatchDir) through the official gRPC client for Node (grpc-js)
// with ../watcher.proto (AGENTBOX_WATCHER_PROTO: the form docs/kubernetes.md
// says was assumed) beside sandboxd's own process.proto: events a command
// causes, relative paths, recursion, the debounce, the statuses of a bad
// path, the last ERROR event of a removed directory, cancelled watches
// giving their slots back, and the token.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');

const BIN = process.env.AGENTBOX_BIN;
const SLOW = process.env.AGENTBOX_SANITIZED === '1' ? 4 : 1;
const opts = { longs: Number, enums: String, defaults: true, oneofs: true };
const { ProcessService } = grpc.loadPackageDefinition(
  loader.loadSync(process.env.AGENTBOX_PROCESS_PROTO, opts)).process.v1;
const { FileWatcherService } = grpc.loadPackageDefinition(
  loader.loadSync(process.env.AGENTBOX_WATCHER_PROTO, opts)).watcher.v1;

let proc, err = '', ws, token, port, watcher, procs;

function withToken(t) {
  const auth = (o, next) => new grpc.InterceptingCall(next(o), {
    start(md, listener, nxt) { md.set('authorization', 'Bearer ' + t); nxt(md, listener); },
  });
  return { interceptors: [auth] };
}

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
}

process.on('exit', () => {
  if (proc && proc.exitCode === null) proc.kill('SIGTERM');
  if (ws) fs.rmSync(ws, { recursive: true, force: true });
});
for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(sig, () => process.exit(1));

before(async () => {
  ws = fs.mkdtempSync(path.join(os.tmpdir(), 'agentbox-gwatch-'));
  fs.mkdirSync(path.join(ws, 'sub', 'deep'), { recursive: true });
  fs.writeFileSync(path.join(ws, 'file'), 'x');
  port = await freePort();
  proc = spawn(BIN, ['runtime', '--workspace', ws, '--http-port', String(await freePort()),
    '--grpc-port', String(port)], { stdio: ['ignore', 'ignore', 'pipe'] });
  const exited = new Promise((r) => proc.on('exit', r));
  await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('agentbox runtime did not start: ' + err)),
      30000 * SLOW);
    proc.stderr.on('data', (d) => {
      err += d;
      if (err.includes('ProcessService on')) { clearTimeout(t); resolve(); }
    });
    exited.then(() => reject(new Error('agentbox runtime ended: ' + err)));
  });
  token = fs.readFileSync(/token in (\S+) \(send it/.exec(err)[1], 'utf8').trim();
  watcher = new FileWatcherService('127.0.0.1:' + port, grpc.credentials.createInsecure(),
    withToken(token));
  procs = new ProcessService('127.0.0.1:' + port, grpc.credentials.createInsecure(),
    withToken(token));
});

after(async () => {
  watcher?.close();
  procs?.close();
  if (proc && proc.exitCode === null) {
    const exited = new Promise((r) => proc.on('exit', r));
    proc.kill('SIGTERM');
    await exited;
  }
  assert.doesNotMatch(err, /Sanitizer|runtime error:/);
});

const sh = (script) => new Promise((resolve, reject) => procs.Execute(
  { config: { command: ['/bin/sh', '-c', script] } }, (e, res) => {
    if (e) reject(e);
    else if (res.exitCode !== 0) reject(new Error(script + ': ' + res.stderr));
    else resolve(res);
  }));

// A watch: its events with the time each came, `ready` once the stream has
// begun (the response's headers: the server watches), `done` at its end.
function watch(req, client = watcher) {
  const call = client.WatchDir(req);
  const w = { call, events: [] };
  w.ready = new Promise((resolve) => call.on('metadata', resolve));
  w.done = new Promise((resolve) => {
    call.on('data', (m) => w.events.push({ ...m, at: Date.now() }));
    call.on('error', (e) => resolve(e));
    call.on('end', () => resolve(null));
  });
  return w;
}

async function until(pred, ms = 10000 * SLOW) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (pred()) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return pred();
}

const has = (w, type, p) => w.events.some((e) => e.type === 'FILE_EVENT_TYPE_' + type &&
  e.path === p);

test('a recursive watch reports a command\'s changes, relative to /workspace, debounced', async () => {
  const w = watch({ path: '', recursive: true });
  await w.ready;
  const t0 = Date.now();
  await sh('cd /workspace && echo hi > new.txt && mkdir -p sub/deep/made && ' +
    'echo x > sub/deep/made/f && chmod 600 new.txt && mv new.txt renamed.txt && rm file');
  assert.ok(await until(() => has(w, 'REMOVE', 'file')), JSON.stringify(w.events));
  assert.ok(has(w, 'CREATE', 'new.txt'));
  assert.ok(has(w, 'WRITE', 'new.txt'));
  assert.ok(has(w, 'CHMOD', 'new.txt'));
  assert.ok(has(w, 'CREATE', 'sub/deep/made'));
  assert.ok(await until(() => has(w, 'CREATE', 'sub/deep/made/f')), JSON.stringify(w.events));
  const ren = w.events.find((e) => e.type === 'FILE_EVENT_TYPE_RENAME');
  assert.equal(ren.path, 'renamed.txt');
  assert.equal(ren.oldPath, 'new.txt');
  // held ~250 ms before they go: none sooner than that after the first change
  assert.ok(w.events[0].at - t0 >= 200, `first event after ${w.events[0].at - t0} ms`);
  w.call.cancel();
  assert.equal((await w.done).code, grpc.status.CANCELLED);
});

test('a watch that is not recursive sees only its directory', async () => {
  const w = watch({ path: 'sub' });
  await w.ready;
  await sh('cd /workspace/sub && touch top && touch deep/below');
  assert.ok(await until(() => has(w, 'CREATE', 'sub/top')), JSON.stringify(w.events));
  await new Promise((r) => setTimeout(r, 600));
  assert.ok(!w.events.some((e) => e.path.startsWith('sub/deep/')), JSON.stringify(w.events));
  w.call.cancel();
  await w.done;
});

test('a missing path is NOT_FOUND, a file INVALID_ARGUMENT, ../ PERMISSION_DENIED', async () => {
  await sh('touch /workspace/plain');
  assert.equal((await watch({ path: 'nope' }).done).code, grpc.status.NOT_FOUND);
  assert.equal((await watch({ path: 'plain' }).done).code, grpc.status.INVALID_ARGUMENT);
  assert.equal((await watch({ path: '../etc' }).done).code, grpc.status.PERMISSION_DENIED);
  assert.equal((await watch({ path: '/etc' }).done).code, grpc.status.NOT_FOUND);
});

test('a watched directory removed: a last ERROR event, then the stream ends OK', async () => {
  await sh('mkdir -p /workspace/gone');
  const w = watch({ path: 'gone', recursive: true });
  await w.ready;
  await sh('rmdir /workspace/gone');
  assert.equal(await w.done, null);
  const last = w.events.at(-1);
  assert.equal(last.type, 'FILE_EVENT_TYPE_ERROR');
  assert.match(last.error, /removed/);
});

test('cancelled watches give their slots back; a watch needs the token', async () => {
  for (let i = 0; i < 12; i++) { // more than --max-concurrent (8)
    const w = watch({ path: '', recursive: true });
    await w.ready;
    w.call.cancel();
    await w.done;
  }
  await sh('true'); // a slot is free
  const anon = new FileWatcherService('127.0.0.1:' + port, grpc.credentials.createInsecure());
  const e = await watch({ path: '' }, anon).done;
  assert.equal(e.code, grpc.status.UNAUTHENTICATED);
  anon.close();
});
