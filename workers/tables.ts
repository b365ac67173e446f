// Piscina worker: parses, checks and digests table bodies off the event loop (src/catalog/table-prepare.ts).
import { move, transferableSymbol, valueSymbol } from 'piscina'
import { prepareTableTask, type TableTask } from '../src/catalog/table-prepare.js'

export default function tables(task: TableTask) {
  const r = prepareTableTask(task)
  if (!r.ok) return r
  // Packed rows or row digests move back: their buffers are this thread's (the body came by transfer or as a copy).
  const packed = r.route === 'digests' ? (Array.isArray(r.rowDigests) ? undefined : r.rowDigests) : r.packed
  if (!packed) return r
  const { text, ends } = packed
  return move({
    get [transferableSymbol]() {
      return [text.buffer, ends.buffer]
    },
    get [valueSymbol]() {
      return r
    },
  })
}
