import { SELECT_OUT } from './read/merged.js'

/**
 * What a block file holds a call as (storage/page-blocks.ts): the row a page answers with (read/merged.ts
 * SELECT_OUT, which read/to-call.ts turns into the call), from a compacted segment's row (a call merged
 * once, as the merge path merges it per page), with its row number in the file. Here, between read/ and
 * storage/, so that neither folder imports the other both ways. Microseconds as text: a JSON number past
 * 2^53 would lose digits (toCall takes either).
 */
export function blockRowsSql(segmentSql: string): string {
  return `SELECT * REPLACE (started_us::VARCHAR AS started_us, ended_us::VARCHAR AS ended_us)
    FROM (SELECT ${SELECT_OUT}, m.file_row_number FROM read_parquet(${segmentSql}, file_row_number = true) m)`
}
