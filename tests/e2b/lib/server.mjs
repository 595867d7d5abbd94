// agentbox e2b started as a test's child: on a free loopback port, with an
// API key of the test's own in a 0600 file, ended (by its pid) when the test
// is over. What the e2b SDK needs to reach it and nothing else is in env():
// E2B_API_URL and E2B_SANDBOX_URL (both the one port), E2B_API_KEY.
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer()
    s.once('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

function connects(port) {
  return new Promise((resolve) => {
    const c = net.connect(port, '127.0.0.1')
    c.once('connect', () => {
      c.destroy()
      resolve(true)
    })
    c.once('error', () => resolve(false))
  })
}

export async function startServer({ bin = process.env.AGENTBOX_BIN, args = [] } = {}) {
  if (!bin) throw new Error('AGENTBOX_BIN must name the agentbox binary to test')
  const dir = mkdtempSync(join(tmpdir(), 'agentbox-e2b-'))
  // E2B's keys are e2b_ and 40 hex digits; the SDK checks the shape
  const key = `e2b_${randomBytes(20).toString('hex')}`
  const keyFile = join(dir, 'key')
  writeFileSync(keyFile, key + '\n', { mode: 0o600 })
  const port = await freePort()
  const child = spawn(
    bin,
    ['e2b', '--listen', '127.0.0.1', '--port', String(port), '--api-key-file', keyFile, ...args],
    { stdio: ['ignore', 'inherit', 'inherit'] }
  )
  let exited = null
  child.once('exit', (code, signal) => (exited = signal ?? code))
  child.once('error', (e) => (exited = e.code)) // not started (ENOENT): no exit
  const deadline = Date.now() + 15000
  while (!(await connects(port))) {
    const why =
      exited !== null
        ? `agentbox e2b ended (${exited}) before it listened`
        : Date.now() > deadline && 'agentbox e2b did not listen within 15 s'
    if (why) {
      if (exited === null) child.kill('SIGKILL')
      rmSync(dir, { recursive: true, force: true }) // the key goes with it
      throw new Error(why)
    }
    await new Promise((r) => setTimeout(r, 50))
  }
  const url = `http://127.0.0.1:${port}`
  return {
    url,
    key,
    port,
    env: () => ({ E2B_API_URL: url, E2B_SANDBOX_URL: url, E2B_API_KEY: key }),
    async stop() {
      if (exited === null) {
        const gone = new Promise((r) => child.once('exit', r))
        child.kill('SIGTERM')
        const t = setTimeout(() => child.kill('SIGKILL'), 10000)
        await gone
        clearTimeout(t)
      }
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
