/**
 * One grammar lane, inside its worker thread: its own xgrammar instance, compiled-grammar cache and
 * the matchers made from them. Compiles are synchronous WebAssembly; here they hold up only this
 * thread, never the model's decode loop.
 */
import type { MessagePort } from 'node:worker_threads'
import { GrammarError, Grammars, type TokenMatcher } from './grammars.js'
import type { LaneCommand, LaneConfig, LaneReply } from './lane-protocol.js'

export function serveLane(config: LaneConfig, port: MessagePort): void {
  let evicted: string[] = []
  let cleared = false
  const grammars = new Grammars(config.vocab, 64, {
    evicted: (key) => evicted.push(key),
    cleared: () => (cleared = true),
  })
  const matchers = new Map<number, TokenMatcher>()
  let next = 1
  const reply = (r: LaneReply, transfer: ArrayBuffer[] = []) => port.postMessage(r, transfer)

  const open = async (c: Extract<LaneCommand, { op: 'open' }>) => {
    const compiled = await grammars.compile(c.constraint)
    const ids: number[] = []
    for (let i = 0; i < c.n; i++) {
      const id = next++
      matchers.set(id, await grammars.matcher(compiled, c.stopIds))
      ids.push(id)
    }
    const r: LaneReply = { op: 'opened', id: c.id, matchers: ids, evicted, cleared }
    evicted = []
    cleared = false
    return r
  }

  // Commands run one at a time, in arrival order: a mask must see every token accepted before it. The first
  // loads the instance, so that a compile's time limit (lanes.ts) does not count the load.
  const ready = () => port.postMessage({ op: 'ready' } satisfies LaneReply)
  let queue: Promise<void> = grammars.warm().then(ready, ready)
  port.on('message', (m: LaneCommand) => {
    queue = queue.then(() => handle(m))
  })

  const handle = async (m: LaneCommand): Promise<void> => {
    try {
      switch (m.op) {
        case 'open':
          return reply(await open(m))
        case 'mask': {
          const matcher = matchers.get(m.matcher)
          if (!matcher) throw new Error(`no matcher ${m.matcher}`)
          if (matcher.terminated) return reply({ op: 'mask', id: m.id, mask: null })
          const mask = await matcher.nextMask()
          return reply({ op: 'mask', id: m.id, mask }, [mask.buffer as ArrayBuffer])
        }
        case 'accept':
          matchers.get(m.matcher)?.accept(m.token)
          return
        case 'dispose':
          matchers.get(m.matcher)?.dispose()
          matchers.delete(m.matcher)
          return
      }
    } catch (e) {
      if (!('id' in m)) return console.error(e)
      const grammar = e instanceof GrammarError
      reply({ op: 'error', id: m.id, message: grammar ? e.message : String((e as Error).stack ?? e), grammar })
    }
  }
}
