/**
 * The ClickHouse peer of the tables bench in a process of its own (tables-peer-process.ts starts it): chdb's heap
 * (6-18 GB at 1M rows) and its threads then stay out of the bench process that times weft's requests. Each message
 * names a ClickHousePeer method and its arguments; the answer carries its result and the time the call took here.
 */
import { ClickHousePeer, loadChdb } from './tables-peer.js'

interface Call {
  id: number
  method: string
  args: unknown[]
}

const chdb = loadChdb()
if (!chdb) {
  process.send!({ id: 0, error: 'chdb not installed' })
  process.exit(1)
}
const peer = new ClickHousePeer(new chdb.Session(process.argv[2]))

process.on('message', (m: Call) => {
  void (async () => {
    const t0 = performance.now()
    try {
      if (m.method === 'close') {
        peer.cleanup()
        process.send!({ id: m.id, result: null, ms: performance.now() - t0 }, () => process.exit(0))
        return
      }
      const fn = m.method === 'ping' ? () => null : (peer as unknown as Record<string, (...a: unknown[]) => unknown>)[m.method]
      if (typeof fn !== 'function') throw new Error(`peer: no method ${m.method}`)
      const result = await fn.apply(peer, m.args)
      process.send!({ id: m.id, result, ms: performance.now() - t0 })
    } catch (e) {
      process.send!({ id: m.id, error: (e as Error).message, ms: performance.now() - t0 })
    }
  })()
})
process.send!({ id: 0, result: 'ready' })
