// The published e2b SDK (npm, pinned in package-lock.json) against agentbox
// e2b started by the test on a free loopback port: E2B_API_URL and
// E2B_SANDBOX_URL point the SDK at it, E2B_API_KEY is the server's key.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { startServer } from '../lib/server.mjs'

let server
let e2b
before(async () => {
  server = await startServer()
  Object.assign(process.env, server.env())
  e2b = await import('e2b')
})
after(async () => {
  if (server) await server.stop()
})

describe('sandbox', () => {
  let sbx
  before(async () => {
    sbx = await e2b.Sandbox.create('base', { timeoutMs: 120_000 })
  })
  after(async () => {
    if (sbx) await sbx.kill()
  })

  test('a command runs', async () => {
    const r = await sbx.commands.run('echo out; echo hi >&2')
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, 'out\n')
    assert.equal(r.stderr, 'hi\n')
  })

  test('files: write, read, info, list, exists, rename, remove', async () => {
    const info = await sbx.files.write('dir/a.txt', 'hello')
    assert.equal(info.name, 'a.txt')
    assert.equal(info.path, '/home/user/dir/a.txt')
    assert.equal(await sbx.files.read('dir/a.txt'), 'hello')
    const bytes = await sbx.files.read('/home/user/dir/a.txt', { format: 'bytes' })
    assert.deepEqual([...bytes], [...Buffer.from('hello')])
    const st = await sbx.files.getInfo('dir/a.txt')
    assert.equal(st.type, 'file')
    assert.equal(st.size, 5)
    // the server's umask, as E2B's 022 gives 0644 (not its launcher's 077)
    assert.equal(st.mode, 0o666 & ~process.umask())
    const { stdout: pwd } = await sbx.commands.run('pwd')
    assert.equal(st.path, pwd.trim() + '/dir/a.txt') // a command starts in /home/user
    assert.ok(st.modifiedTime instanceof Date)
    assert.equal(await sbx.files.makeDir('dir/sub/deep'), true)
    assert.equal(await sbx.files.makeDir('dir/sub/deep'), false)
    const names = (await sbx.files.list('dir')).map((e) => e.name).sort()
    assert.deepEqual(names, ['a.txt', 'sub'])
    const deep = (await sbx.files.list('dir', { depth: 3 })).map((e) => e.path).sort()
    assert.deepEqual(deep, ['/home/user/dir/a.txt', '/home/user/dir/sub', '/home/user/dir/sub/deep'])
    assert.equal(await sbx.files.exists('dir/a.txt'), true)
    assert.equal(await sbx.files.exists('dir/none'), false)
    const moved = await sbx.files.rename('dir/a.txt', 'dir/b.txt')
    assert.equal(moved.path, '/home/user/dir/b.txt')
    await sbx.files.remove('dir/b.txt')
    assert.equal(await sbx.files.exists('dir/b.txt'), false)
    await sbx.files.write([
      { path: 'multi/1', data: 'one' },
      { path: 'multi/2', data: new Uint8Array([0, 1, 2]) },
    ])
    assert.equal(await sbx.files.read('multi/1'), 'one')
    const two = await sbx.files.read('multi/2', { format: 'bytes' })
    assert.deepEqual([...two], [0, 1, 2])
  })

  test('signed URLs: download and upload with no header, expired refused', async () => {
    await sbx.files.write('signed.txt', 'signed')
    let res = await fetch(await sbx.downloadUrl('signed.txt', { useSignatureExpiration: 60 }))
    assert.equal(res.status, 200)
    assert.equal(await res.text(), 'signed')
    const form = new FormData()
    form.append('file', 'uploaded')
    res = await fetch(await sbx.uploadUrl('up.txt'), { method: 'POST', body: form })
    assert.equal(res.status, 200)
    assert.equal(await sbx.files.read('up.txt'), 'uploaded')
    res = await fetch(await sbx.downloadUrl('signed.txt', { useSignatureExpiration: -10 }))
    assert.equal(res.status, 401)
    assert.deepEqual(await res.json(), { code: 401, message: 'signature is already expired' })
  })

  test('metadata: kept on upload, given by getInfo, list and rename, gone on overwrite', async () => {
    const metadata = { author: 'me', purpose: 'a test' }
    const info = await sbx.files.write('meta/m.txt', 'x', { metadata })
    assert.deepEqual(info.metadata, metadata)
    assert.deepEqual((await sbx.files.getInfo('meta/m.txt')).metadata, metadata)
    const listed = (await sbx.files.list('meta')).find((e) => e.name === 'm.txt')
    assert.deepEqual(listed.metadata, metadata)
    assert.deepEqual((await sbx.files.rename('meta/m.txt', 'meta/n.txt')).metadata, metadata)
    await sbx.files.write('meta/n.txt', 'y')
    assert.equal((await sbx.files.getInfo('meta/n.txt')).metadata, undefined)
  })

  test('a missing file is NotFoundError; a file is no directory', async () => {
    await assert.rejects(sbx.files.read('nope'), e2b.NotFoundError)
    await assert.rejects(sbx.files.getInfo('nope'), e2b.NotFoundError)
    await assert.rejects(sbx.files.list('nope'), e2b.NotFoundError)
    await sbx.files.write('plain', 'x')
    await assert.rejects(sbx.files.list('plain'), e2b.InvalidArgumentError)
  })

  test('watchDir reports a write', async () => {
    await sbx.files.makeDir('watched')
    const events = []
    const seen = new Promise((resolve) => {
      const h = sbx.files.watchDir('watched', (ev) => {
        events.push(ev)
        if (ev.name === 'w.txt') resolve(h)
      })
      h.then(() => sbx.files.write('watched/w.txt', 'data'))
    })
    const handle = await (await seen)
    await handle.stop()
    assert.ok(events.some((ev) => ev.name === 'w.txt'))
  })

  test('gzip upload', async () => {
    const info = await sbx.files.write('gz/z.txt', 'zipped '.repeat(1000), { gzip: true })
    assert.equal(info.path, '/home/user/gz/z.txt')
    assert.equal(await sbx.files.read('gz/z.txt'), 'zipped '.repeat(1000))
    assert.deepEqual((await sbx.files.list('gz')).map((e) => e.name), ['z.txt'])
  })

  test('the watcher API: create, events, remove', async () => {
    await sbx.files.makeDir('polled')
    const call = async (method, body) => {
      const res = await fetch(`${server.url}/filesystem.Filesystem/${method}`, {
        method: 'POST',
        headers: {
          'Content-Type': 'application/json',
          'Connect-Protocol-Version': '1',
          'E2b-Sandbox-Id': sbx.sandboxId,
          'X-Access-Token': sbx.envdAccessToken ?? '',
        },
        body: JSON.stringify(body),
      })
      return { status: res.status, body: await res.json() }
    }
    const made = await call('CreateWatcher', { path: '/home/user/polled' })
    assert.equal(made.status, 200, JSON.stringify(made.body))
    const id = made.body.watcherId
    await sbx.files.write('polled/p.txt', 'x')
    let events = []
    for (let i = 0; i < 50 && !events.some((e) => e.name === 'p.txt'); i++) {
      const got = await call('GetWatcherEvents', { watcherId: id })
      assert.equal(got.status, 200, JSON.stringify(got.body))
      events = events.concat(got.body.events ?? [])
      await new Promise((r) => setTimeout(r, 50))
    }
    assert.ok(events.some((e) => e.name === 'p.txt' && e.type === 'EVENT_TYPE_CREATE'))
    assert.equal((await call('RemoveWatcher', { watcherId: id })).status, 200)
    const gone = await call('GetWatcherEvents', { watcherId: id })
    assert.equal(gone.status, 404)
    assert.equal(gone.body.code, 'not_found')
  })
})

// Snapshots and fork (docs/e2b.md): agentbox checkpoints and forks of the
// sandbox's overlay workspace.
describe('snapshots and fork', () => {
  let sbx
  before(async () => {
    sbx = await e2b.Sandbox.create('base', { timeoutMs: 120_000 })
  })
  after(async () => {
    if (sbx) await sbx.kill()
  })

  test('a snapshot: made, listed, a sandbox from it, deleted', async () => {
    await sbx.files.write('snap/api.txt', 'by the files API')
    // a command's write by E2B's path: /home/user is /workspace's overlay
    await sbx.commands.run('echo by a command > /home/user/snap/cmd.txt')
    const snap = await sbx.createSnapshot({ name: 'snap-sdk' })
    assert.ok(snap.snapshotId.startsWith(sbx.sandboxId + '-'), snap.snapshotId)
    assert.deepEqual(snap.names, ['snap-sdk'])
    await sbx.files.write('snap/later.txt', 'after the snapshot')
    await sbx.files.write('snap/api.txt', 'changed after')

    const all = await e2b.Sandbox.listSnapshots().nextItems()
    assert.ok(all.some((s) => s.snapshotId === snap.snapshotId))
    const mine = await sbx.listSnapshots().nextItems()
    assert.deepEqual(mine.map((s) => s.snapshotId), [snap.snapshotId])
    const named = await e2b.Sandbox.listSnapshots({ name: 'snap-sdk' }).nextItems()
    assert.equal(named.length, 1)
    assert.equal((await e2b.Sandbox.listSnapshots({ name: 'none' }).nextItems()).length, 0)

    const from = await e2b.Sandbox.create(snap.snapshotId, { timeoutMs: 60_000 })
    try {
      assert.notEqual(from.sandboxId, sbx.sandboxId)
      assert.equal(await from.files.read('snap/api.txt'), 'by the files API')
      const r = await from.commands.run('cat /home/user/snap/cmd.txt')
      assert.equal(r.stdout, 'by a command\n')
      assert.equal(await from.files.exists('snap/later.txt'), false)
      await from.files.write('snap/api.txt', 'the new one')
      assert.equal(await sbx.files.read('snap/api.txt'), 'changed after')
    } finally {
      await from.kill()
    }
    assert.equal(await e2b.Sandbox.deleteSnapshot(snap.snapshotId), true)
    assert.equal(await e2b.Sandbox.deleteSnapshot(snap.snapshotId), false)
    await assert.rejects(e2b.Sandbox.create(snap.snapshotId), /not found/)
  })

  test('a snapshot outlives its sandbox until deleted', async () => {
    const gone = await e2b.Sandbox.create('base', { timeoutMs: 60_000 })
    await gone.files.write('kept.txt', 'kept')
    const snap = await gone.createSnapshot()
    await gone.kill()
    const ids = (await e2b.Sandbox.list().nextItems()).map((s) => s.sandboxId)
    assert.ok(!ids.includes(gone.sandboxId))
    await assert.rejects(e2b.Sandbox.connect(gone.sandboxId), e2b.NotFoundError)
    const from = await e2b.Sandbox.create(snap.snapshotId, { timeoutMs: 60_000 })
    try {
      assert.equal(await from.files.read('kept.txt'), 'kept')
    } finally {
      await from.kill()
    }
    assert.equal(await e2b.Sandbox.deleteSnapshot(snap.snapshotId), true)
  })

  test('fork: count, each its own, the state at the fork', async () => {
    await sbx.files.write('fork.txt', 'before the fork')
    const forks = await sbx.fork({ count: 2, timeoutMs: 60_000 })
    assert.equal(forks.length, 2)
    try {
      for (const f of forks) assert.ok(f instanceof e2b.Sandbox, String(f))
      const ids = new Set(forks.map((f) => f.sandboxId))
      assert.equal(ids.size, 2)
      assert.ok(!ids.has(sbx.sandboxId))
      assert.equal(await sbx.isRunning(), true)
      await forks[0].files.write('fork.txt', 'in fork 0')
      assert.equal(await forks[1].files.read('fork.txt'), 'before the fork')
      assert.equal(await sbx.files.read('fork.txt'), 'before the fork')
      const r = await forks[1].commands.run('cat fork.txt')
      assert.equal(r.stdout, 'before the fork')
    } finally {
      await Promise.all(forks.map((f) => f.kill()))
    }
    await assert.rejects(e2b.Sandbox.fork(sbx.sandboxId, { count: 0 }), e2b.InvalidArgumentError)
    const dead = await e2b.Sandbox.create('base')
    await dead.kill()
    await assert.rejects(dead.fork(), e2b.SandboxNotFoundError)
  })
})

// getHost(port) is `${port}-${sandboxId}.${domain}`, the domain the server
// answers (localhost:ITS_PORT): names under .localhost are loopback's (RFC
// 6761), as systemd-resolved and nss-myhostname resolve them and browsers do.
// Node asks the system's resolver, which on a host without either (this
// one: /etc/hosts, then DNS) does not know them: the test resolves them
// itself, as such a resolver would (docs/e2b.md, "Ports").
describe('getHost(port)', () => {
  let sbx
  let lookup
  before(async () => {
    const dns = (await import('node:dns')).default
    lookup = dns.lookup
    dns.lookup = (host, opts, cb) => {
      if (typeof opts === 'function') [cb, opts] = [opts, {}]
      if (!/\.localhost\.?$/i.test(host)) return lookup(host, opts, cb)
      const all = typeof opts === 'object' && opts.all
      return process.nextTick(() =>
        all ? cb(null, [{ address: '127.0.0.1', family: 4 }]) : cb(null, '127.0.0.1', 4)
      )
    }
    sbx = await e2b.Sandbox.create('base', { timeoutMs: 120_000 })
  })
  after(async () => {
    if (lookup) (await import('node:dns')).default.lookup = lookup
    if (sbx) await sbx.kill().catch(() => {})
  })

  async function fetchWhenUp(url, init) {
    for (let i = 0; ; i++) {
      const res = await fetch(url, { ...init, signal: AbortSignal.timeout(5000) })
      if (res.status !== 502 || i >= 100) return res
      await res.arrayBuffer()
      await new Promise((r) => setTimeout(r, 100))
    }
  }

  test('a server started in the sandbox, reached through getHost', async () => {
    await sbx.files.write('index.html', 'hello from inside\n')
    const cmd = await sbx.commands.run('python3 -m http.server 8000 --bind 127.0.0.1', {
      background: true,
    })
    try {
      const host = sbx.getHost(8000)
      assert.equal(host, `8000-${sbx.sandboxId}.localhost:${server.port}`)
      const res = await fetchWhenUp(`http://${host}/index.html`)
      assert.equal(res.status, 200)
      assert.equal(await res.text(), 'hello from inside\n')
      // nothing listens on 8001: E2B's proxy's 502, at once
      const closed = await fetch(`http://${sbx.getHost(8001)}/`)
      assert.equal(closed.status, 502)
      const why = await closed.json()
      assert.equal(why.sandboxId, sbx.sandboxId)
      assert.equal(why.port, 8001)
    } finally {
      await cmd.kill()
    }
  })

  test('allowPublicTraffic false: its trafficAccessToken in e2b-traffic-access-token', async () => {
    const priv = await e2b.Sandbox.create('base', {
      timeoutMs: 120_000,
      network: { allowPublicTraffic: false },
    })
    try {
      assert.ok(priv.trafficAccessToken)
      await priv.commands.run('python3 -m http.server 8080 --bind 127.0.0.1', { background: true })
      const url = `http://${priv.getHost(8080)}/`
      const headers = { 'e2b-traffic-access-token': priv.trafficAccessToken }
      assert.equal((await fetchWhenUp(url, { headers })).status, 200)
      const res = await fetch(url)
      assert.equal(res.status, 403)
    } finally {
      await priv.kill()
    }
  })

  test('a killed sandbox: 502, "The sandbox was not found", as E2B\'s', async () => {
    const gone = await e2b.Sandbox.create('base', { timeoutMs: 60_000 })
    const url = `http://${gone.getHost(3000)}`
    await gone.kill()
    const res = await fetch(url)
    assert.equal(res.status, 502)
    const json = await res.json()
    assert.equal(json.message, 'The sandbox was not found')
    assert.equal(json.sandboxId, gone.sandboxId)
    assert.equal(json.code, 502)
  })
})
