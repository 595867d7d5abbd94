#!/usr/bin/env node
// Issue 53's benchmark: Sandbox.create() + commands.run('true') + kill()
// through the published e2b SDK (tests/e2b's node_modules: run `tests/e2b/run`
// once first, which installs it from the lockfile) against `agentbox e2b`,
// started here on a free loopback port. Each round is timed step by step,
// with a gap between rounds (an agent's cadence); prints median, p99 and min.
//
//   AGENTBOX_BIN=build/agentbox node bench/e2b-sdk.mjs [ROUNDS] [GAP_SECONDS]
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const e2bDir = join(here, '..', 'tests', 'e2b')
const { startServer } = await import(join(e2bDir, 'lib', 'server.mjs'))
const require = createRequire(join(e2bDir, 'package.json'))
const { Sandbox } = await import(require.resolve('e2b'))

const rounds = Number(process.argv[2] || 20)
const gap = Number(process.argv[3] ?? 0.3) * 1000
const srv = await startServer({ bin: process.env.AGENTBOX_BIN || join(here, '..', 'build', 'agentbox') })
Object.assign(process.env, srv.env())
const t = { create: [], run: [], kill: [], all: [] }
try {
  for (let i = 0; i < rounds; i++) {
    const t0 = performance.now()
    const sbx = await Sandbox.create()
    const t1 = performance.now()
    const r = await sbx.commands.run('true')
    if (r.exitCode !== 0) throw new Error(`true exited ${r.exitCode}`)
    const t2 = performance.now()
    await sbx.kill()
    const t3 = performance.now()
    t.create.push(t1 - t0)
    t.run.push(t2 - t1)
    t.kill.push(t3 - t2)
    t.all.push(t3 - t0)
    if (gap) await new Promise((res) => setTimeout(res, gap))
  }
} finally {
  await srv.stop()
}
const q = (a, p) => {
  const s = [...a].sort((x, y) => x - y)
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]
}
console.log(`agentbox e2b through the e2b SDK, ${rounds} rounds, ${gap / 1000} s apart (ms):`)
for (const [k, a] of Object.entries(t))
  console.log(`  ${k.padEnd(7)} median ${q(a, 50).toFixed(1).padStart(7)}  p99 ${q(a, 99)
    .toFixed(1).padStart(7)}  min ${Math.min(...a).toFixed(1).padStart(7)}`)
