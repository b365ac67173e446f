// Piscina worker: parses, checks and digests table bodies off the event loop (src/catalog/table-prepare.ts).
import { prepareTableTask, type TableTask } from '../src/catalog/table-prepare.js'

export default function tables(task: TableTask) {
  return prepareTableTask(task)
}
