import t, { type Test } from 'tap'
import { rm } from 'node:fs/promises'
import { FAST_FLUSH, Ledger, restart, verify, write, writeUntilDeath, type Kind } from './crash.js'
import { startServer, tempDir, type TestServer } from './server.js'

export interface CrashPoint {
  point: string
  /** What to write while it is armed (calls reach the flush, rollup and compaction steps). */
  kinds?: Kind[]
  /**
   * The point is reached by the start itself (the rollups catch up as the server comes up): the armed run may
   * die before or right after it listens, so it neither checks the previous crash nor needs to write.
   */
  atStart?: boolean
  /** Done to the stopped server's data directory before the armed start (e.g. removing derived files). */
  before?: (dataDir: string) => Promise<void>
}

/**
 * Rows of the crash matrix, chained on one data directory (a start costs seconds on a loaded machine): a
 * clean run writes some of everything; then, per point, a run with the point armed first checks what the
 * previous crash left (every acknowledged write exactly once, statistics recounted) and writes until the
 * failpoint kills it; a last clean start checks the last crash.
 */
export function crashChain(name: string, points: CrashPoint[]): void {
  t.test(name, async (t) => {
    const dataDir = tempDir('weft-crash-')
    t.teardown(() => rm(dataDir, { recursive: true, force: true }))
    const ledger = new Ledger()
    let s: TestServer = await startServer({ dataDir, env: FAST_FLUSH })
    const key = s.key
    for (const k of ['calls', 'object', 'table', 'file', 'feedback', 'key'] as Kind[])
      t.equal(await write(s, k, ledger), 200, `before: ${k} written`)
    await s.stop('SIGKILL')
    for (const { point, kinds = ['calls' as Kind], atStart, before } of points) {
      await t.test(point, async (t) => {
        await before?.(dataDir)
        const armed = { WEFT_FAILPOINTS: `${point}:kill` }
        if (atStart) return armedStart(t, dataDir, key, armed, kinds, ledger)
        s = await restart(dataDir, key, armed)
        await verify(t, s, ledger)
        await writeUntilDeath(t, s, kinds, ledger)
      })
    }
    s = await restart(dataDir, key)
    t.teardown(() => s.stop())
    await t.test('after the last crash', (t) => verify(t, s, ledger))
  })
}

async function armedStart(t: Test, dataDir: string, key: string, env: Record<string, string>, kinds: Kind[], ledger: Ledger) {
  let s: TestServer
  try {
    s = await restart(dataDir, key, env)
  } catch (e) {
    t.match(String(e), /server exited with null before listening/, 'the failpoint killed the server during its start')
    return
  }
  await writeUntilDeath(t, s, kinds, ledger)
}
