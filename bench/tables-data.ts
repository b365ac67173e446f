/**
 * Data for the tables bench: fresh dataset rows per run (~`rowBytes` of JSON each), object versions,
 * the chunks a client sends them in, and the answers expected from both sides, computed here from the
 * generated rows.
 */
import { createHash } from 'node:crypto'
import { pythonJsonDumps, digestBytes } from '../src/catalog/digest.js'

export const PROJECT = 'bench/tables'
/** The Python SDK's target chunk size for big tables (weave/trace/table_upload_chunking.py: 10 MB). */
export const CHUNK_BYTES = 10 * 1024 * 1024

export type Row = Record<string, unknown>

/** A small, fast, seeded PRNG (mulberry32): the same run makes the same rows on both sides. */
export function prng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const WORDS =
  'the a model answer question context evaluate score prompt token dataset row label expected output input retrieval latency user system assistant reason step check value table object version weave trace call result'.split(
    ' ',
  )

function text(rand: () => number, bytes: number): string {
  let s = ''
  while (s.length < bytes) s += WORDS[Math.floor(rand() * WORDS.length)]! + ' '
  return s.slice(0, Math.max(0, bytes))
}

/**
 * Row i of run `nonce`: an evaluation example. `score` is unique within a run (an odd multiplier is a
 * bijection mod 2^32), so a sort by it has one right answer.
 */
function makeRow(rand: () => number, nonce: number, i: number, fill: number): Row {
  return {
    id: `run${nonce}-row${i}`,
    question: text(rand, Math.floor(fill * 0.35)),
    context: text(rand, Math.floor(fill * 0.45)),
    expected: text(rand, Math.floor(fill * 0.2)),
    score: (Math.imul(i + 1, 2654435761) >>> 0) / 4294967296,
    tags: ['bench', i % 2 ? 'odd' : 'even', `bucket${i % 16}`],
    meta: { source: 'generated', split: i % 10 === 0 ? 'test' : 'train', index: i },
  }
}

export interface Chunk {
  /** Each row's JSON, in order. */
  parts: string[]
  /** Bytes of row JSON in the chunk. */
  bytes: number
}

/** A run's dataset, kept as the JSON a client sends (no row objects: 1M of them would not fit the bench's heap). */
export interface Dataset {
  chunks: Chunk[]
  digests: string[]
  scores: Float64Array
  bytes: number
  row(i: number): Row
}

/**
 * `n` fresh rows of about `rowBytes` bytes of JSON each (the text fields take what the others leave),
 * split as the Python SDK splits a big table: consecutive rows up to CHUNK_BYTES of serialised row each.
 */
export function makeDataset(n: number, rowBytes: number, nonce: number, chunkBytes = CHUNK_BYTES): Dataset {
  const rand = prng(nonce * 1_000_003 + 17)
  const fill = Math.max(0, rowBytes - JSON.stringify(makeRow(prng(1), nonce, n, 0)).length)
  const chunks: Chunk[] = []
  const starts: number[] = []
  const digests: string[] = new Array(n)
  const scores = new Float64Array(n)
  let cur: Chunk = { parts: [], bytes: 0 }
  let total = 0
  for (let i = 0; i < n; i++) {
    const r = makeRow(rand, nonce, i, fill)
    const j = JSON.stringify(r)
    digests[i] = rowDigest(r)
    scores[i] = r.score as number
    if (cur.parts.length && cur.bytes + j.length > chunkBytes) {
      chunks.push(cur)
      cur = { parts: [], bytes: 0 }
    }
    if (!cur.parts.length) starts.push(i)
    cur.parts.push(j)
    cur.bytes += j.length
    total += j.length
  }
  if (cur.parts.length) chunks.push(cur)
  const row = (i: number): Row => {
    let c = starts.length - 1
    while (starts[c]! > i) c--
    return JSON.parse(chunks[c]!.parts[i - starts[c]!]!) as Row
  }
  return { chunks, digests, scores, bytes: total, row }
}

export const chunkJson = (c: Chunk) => '[' + c.parts.join(',') + ']'

/**
 * Lets the event loop take in what arrived during a long synchronous stretch (generating a dataset, building its
 * bodies) before the clock starts: a kept-alive socket the server closed meanwhile is then dropped from the pool
 * instead of carrying the next request into EPIPE (a retried request, a second lost, in most 1M runs before).
 */
export const settle = () => new Promise<void>((resolve) => setImmediate(() => setImmediate(resolve)))

/** A side a dataset is saved to: weft over HTTP, or the ClickHouse peer doing Weave's server's work. */
export interface Uploader {
  /** Work a client does before it sends (weft: the request bodies); not timed. */
  prepare?(d: Dataset, mode: 'update' | 'digests'): void
  create(c: Chunk): Promise<{ digest: string; row_digests: string[] }>
  append(base: string, c: Chunk): Promise<{ digest: string }>
  fromDigests(digests: string[]): Promise<{ digest: string }>
}

/**
 * Saves a dataset in its chunks as a client does; answers the table digest. `update`: create the first chunk,
 * append the rest one request at a time (the Python SDK's `_append_to_table`); `digests`: every chunk its own
 * table, four requests at a time as a client's thread pool sends them, then one table from all row digests.
 */
export async function uploadDataset(side: Uploader, d: Dataset, mode: 'update' | 'digests'): Promise<string> {
  const [first, ...rest] = d.chunks
  if (mode === 'update') {
    let digest = (await side.create(first!)).digest
    for (const c of rest) digest = (await side.append(digest, c)).digest
    return digest
  }
  const all: string[][] = new Array(d.chunks.length)
  let next = 0
  const client = async () => {
    for (let i = next++; i < d.chunks.length; i = next++) all[i] = (await side.create(d.chunks[i]!)).row_digests
  }
  await Promise.all([client(), client(), client(), client()])
  return (await side.fromDigests(all.flat())).digest
}

/** Weave's row digest, computed here for the expected answers (json.dumps with Python's defaults, then sha256). */
export const rowDigest = (r: Row) => digestBytes(pythonJsonDumps(r))
export const tableDigestOf = (rowDigests: string[]) => createHash('sha256').update(rowDigests.join('')).digest('hex')

export interface PageRow {
  digest: string
  val: unknown
  original_index: number
}

/** The page at `offset`, in table order. */
export function expectedPage(d: Dataset, offset: number, limit: number): PageRow[] {
  const out: PageRow[] = []
  for (let i = offset; i < Math.min(offset + limit, d.digests.length); i++)
    out.push({ digest: d.digests[i]!, val: d.row(i), original_index: i })
  return out
}

/** The first page sorted by `score`, descending. */
export function expectedSorted(d: Dataset, limit: number): PageRow[] {
  const idx = Array.from(d.scores.keys()).sort((a, b) => d.scores[b]! - d.scores[a]!)
  return idx.slice(0, limit).map((i) => ({ digest: d.digests[i]!, val: d.row(i), original_index: i }))
}

/** Version v of object k: a prompt-like object (a Weave Object subclass, so it has a base class). */
export function objectVal(k: number, v: number, nonce: number, rand: () => number): Row {
  return {
    _type: 'Prompt',
    _class_name: 'Prompt',
    _bases: ['Object', 'BaseModel'],
    name: objectId(k),
    description: null,
    system: text(rand, 200),
    template: `${text(rand, 100)} {question} (v${v}, run ${nonce})`,
    params: { temperature: Math.round(rand() * 100) / 100, max_tokens: 256 + v },
  }
}

export const objectId = (k: number) => `prompt_${String(k).padStart(6, '0')}`

/** A dataset object whose rows are the table: what a row ref goes through. */
export function datasetVal(tableDigest: string): Row {
  return {
    _type: 'Dataset',
    _class_name: 'Dataset',
    _bases: ['Object', 'BaseModel'],
    name: 'bench_dataset',
    description: null,
    rows: `weave:///${PROJECT}/table/${tableDigest}`,
  }
}
