import { DuckDBTableFunction, type DuckDBConnection, type DuckDBDataChunk, type DuckDBResult, type DuckDBType } from '@duckdb/node-api'
import type { Data } from 'apache-arrow'
import { fillPartsChunk, partsColumns, VECTOR } from './append-parts.js'

/** The insert of the group being scanned (see ArrowGroupScan): the tail table's columns, in its order. */
export const ARROW_SCAN_SQL = 'INSERT INTO call_parts SELECT * FROM weft_arrow_group()'

/**
 * The most rows a chunk of the scan holds (DuckDB's vector size is 2,048): a chunk is filled in one go on the event
 * loop (~1 µs a row; ~6 when each text value was a binding call of its own, when 512 and 2,048 rows took the same time
 * within noise).
 */
const CHUNK_ROWS = Math.min(VECTOR, 512)

/** A log record's Arrow batch, its seqs and log generation (a group numbers its parts on from its first's base). */
interface GroupBatch {
  batch: Uint8Array
  base: bigint
  gen: number
}

/** Where a scan is: which batch, its decoded columns, the row in it, and the next part's seq. */
interface ScanState {
  group: GroupBatch[]
  at: number
  cols: Data[] | null
  row: number
  seq: bigint
  rows: number
}

/**
 * The table function `weft_arrow_group()` over one group of Arrow parts batches at a time: DuckDB runs an insert from
 * it on its own thread and asks for the rows a data chunk at a time, which the function fills on the event loop
 * (fillPartsChunk: Arrow buffers straight into DuckDB's vectors). One group at a time: the caller runs one
 * statement after another (the tail's inserts are serial).
 */
export class ArrowGroupScan {
  private current: GroupBatch[] | null = null
  private scanned = 0

  /** The table function, whose result has the tail table's columns. Register it on the connection that runs the insert. */
  function(columns: { names: readonly string[]; types: readonly DuckDBType[] }): DuckDBTableFunction {
    return DuckDBTableFunction.create({
      name: 'weft_arrow_group',
      bindFunction: (info) => columns.names.forEach((name, i) => info.addResultColumn(name, columns.types[i]!)),
      initFunction: (info) => {
        info.setMaxThreads(1)
        if (!this.current) throw new Error('weft_arrow_group() scanned with no group in hand')
        const state: ScanState = { group: this.current, at: 0, cols: null, row: 0, seq: this.current[0]?.base ?? 0n, rows: 0 }
        info.setInitData(state)
      },
      mainFunction: (info, out) => this.next(info.initData as ScanState, out),
    })
  }

  /**
   * Runs `insert` (ARROW_SCAN_SQL, on `conn`, where the function is registered) over `group` in a transaction of its
   * own; the number of parts it added, checked against those scanned. On a mismatch the insert is rolled back, so a
   * failed group adds nothing, as a failed statement does (its batches are then taken again from the log).
   */
  async run(group: GroupBatch[], conn: DuckDBConnection, insert: () => Promise<DuckDBResult>): Promise<number> {
    if (this.current) throw new Error('an Arrow group is already being inserted')
    this.current = group
    this.scanned = 0
    try {
      await conn.run('BEGIN TRANSACTION')
      try {
        const added = Number((await insert()).rowsChanged)
        if (added !== this.scanned) throw new Error(`the Arrow group's insert added ${added} parts of ${this.scanned}`)
        await conn.run('COMMIT')
        return added
      } catch (e) {
        await conn.run('ROLLBACK').catch(() => {})
        throw e
      }
    } finally {
      this.current = null
    }
  }

  /** The next chunk of rows (at most CHUNK_ROWS, within one batch); none once the group is done. */
  private next(s: ScanState, out: DuckDBDataChunk): void {
    for (; s.at < s.group.length; s.at++, s.cols = null, s.row = 0) {
      const b = s.group[s.at]!
      s.cols ??= partsColumns(b.batch)
      const n = s.cols?.[0]?.length ?? 0
      if (s.row >= n) continue
      const m = Math.min(CHUNK_ROWS, n - s.row)
      fillPartsChunk(out, s.cols!, s.row, m, s.seq, b.gen)
      s.row += m
      s.seq += BigInt(m)
      this.scanned += m
      return
    }
    out.rowCount = 0
  }
}
