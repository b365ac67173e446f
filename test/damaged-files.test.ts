import t, { type Test } from 'tap'
import { cp, readFile, rm, stat, truncate, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { FAST_FLUSH, Ledger, restart, verify, write } from './helpers/crash.js'
import { startServer, tempDir, type TestServer } from './helpers/server.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'

// Each file of a data directory damaged in turn, then a start: it repairs (derived data), quarantines with a
// warning, or refuses naming the file — and whatever it serves is every acknowledged write, once, with statistics
// equal to a recount. The data directory is written once and copied for each case.

const KEY = 'damaged-files-key-' + Math.random().toString(36).slice(2)
const seed = tempDir('weft-damaged-seed-')
const ledger = new Ledger()
t.teardown(() => rm(seed, { recursive: true, force: true }))

t.before(async () => {
  const s = await startServer({ dataDir: seed, key: KEY, env: FAST_FLUSH })
  // Five batches of five calls, with a flush every ten rows: a segment after the second and the fourth. Each pair
  // waits for its segment because a flush takes the whole tail when it runs: in CI (stop 30) the seed had fewer than
  // two segments, most likely a first flush that began only after all five batches were in.
  for (let i = 0; i < 5; i++) {
    const before = await segmentCount(seed)
    await write(s, 'calls', ledger)
    const deadline = Date.now() + 20_000
    while (i % 2 === 1 && (await segmentCount(seed)) <= before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
  }
  for (const kind of ['object', 'table', 'file', 'feedback', 'key'] as const) await write(s, kind, ledger)
  // Settled: the segments flushed, the rollups caught up; a clean stop leaves the catalog checkpointed.
  await new Promise((r) => setTimeout(r, 500))
  await s.stop()
  if (ledger.doubt.length) throw new Error(`seed writes failed: ${JSON.stringify(ledger.doubt)}`)
})

/** Segments in the directory's calls manifest (0 before the first is written). */
async function segmentCount(dir: string): Promise<number> {
  return segments(dir).then(
    (s) => s.length,
    () => 0,
  )
}

/** A copy of the seeded data directory, removed at the end of the test. */
async function copy(t: Test): Promise<string> {
  const dir = tempDir('weft-damaged-')
  await cp(seed, dir, { recursive: true })
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return dir
}

async function segments(dir: string): Promise<string[]> {
  const m = JSON.parse(await readFile(path.join(dir, 'calls', 'manifest.json'), 'utf8')) as { segments: { file: string }[] }
  return m.segments.map((s) => path.join(dir, 'calls', s.file))
}

/** Starts on the directory: the server, or the start's error message when it refused. */
async function tryStart(dir: string): Promise<TestServer | string> {
  return restart(dir, KEY).catch((e: Error) => e.message)
}

/** Flips a bit at each position given, in one read and one write of the file. */
async function flip(file: string, ...at: number[]): Promise<void> {
  const data = await readFile(file)
  for (const i of at) data[i]! ^= 0x20
  await writeFile(file, data)
}

async function refuses(t: Test, dir: string, name: RegExp): Promise<void> {
  const r = await tryStart(dir)
  if (typeof r !== 'string') {
    // It started: then it must serve every acknowledged write (and statistics) exactly.
    t.teardown(() => r.stop())
    t.fail('the start went on with a damaged file')
    await verify(t, r, ledger)
    return
  }
  t.match(r, name, 'the refusal names the damaged file')
}

t.test('the seed has segments and every write acknowledged', async (t) => {
  t.ok((await segments(seed)).length >= 2, 'several segments')
  t.equal(ledger.acked.length, 10)
})

t.test('a truncated segment: the start refuses, naming it', async (t) => {
  const dir = await copy(t)
  const [seg] = await segments(dir)
  await truncate(seg!, (await stat(seg!)).size - 100)
  await refuses(t, dir, new RegExp(`${path.basename(seg!)}.*(damaged|cannot be read)`))
})

t.test('a segment cut to half its size: the start refuses, naming it', async (t) => {
  const dir = await copy(t)
  const segs = await segments(dir)
  const seg = segs[segs.length - 1]!
  await truncate(seg, Math.floor((await stat(seg)).size / 2))
  await refuses(t, dir, new RegExp(`${path.basename(seg)}.*(damaged|cannot be read)`))
})

t.test('a bit flipped in a segment (data pages, footer, magic): the start refuses, naming it', async (t) => {
  const segs = await segments(seed)
  const size = (await stat(segs[1]!)).size
  for (const at of [8, Math.floor(size / 3), size - 12]) {
    const dir = await copy(t)
    const seg = (await segments(dir))[1]!
    await flip(seg, at)
    await t.test(`byte ${at} of ${size}`, (t) => refuses(t, dir, new RegExp(`${path.basename(seg)}.*(damaged|cannot be read)`)))
  }
})

t.test('a damaged rollups file: rebuilt from the segments, the statistics equal a recount', async (t) => {
  for (const damage of ['garbage', 'flipped'] as const) {
    const dir = await copy(t)
    const file = path.join(dir, 'rollups', 'rollups.duckdb')
    const size = (await stat(file)).size
    if (damage === 'garbage') await writeFile(file, Buffer.alloc(size, 0x5a))
    else {
      // A bit in every 4 KiB, flipped in one pass (a read and a write of the whole file per flip took tens of seconds).
      const every: number[] = []
      for (let at = 4096; at < size; at += 4096) every.push(at + 100)
      await flip(file, ...every)
    }
    const r = await tryStart(dir)
    if (typeof r === 'string') {
      t.fail(`${damage}: derived data must not stop a start: ${r}`)
      continue
    }
    await t.test(damage, async (t) => {
      await waitReady(r)
      await verify(t, r, ledger)
    })
    await r.stop()
  }
})

t.test('a damaged catalog: the start refuses, naming catalog.duckdb', async (t) => {
  for (const damage of ['truncated', 'header'] as const) {
    const dir = await copy(t)
    const file = path.join(dir, 'catalog.duckdb')
    const size = (await stat(file)).size
    if (damage === 'truncated') await truncate(file, 4096)
    else await flip(file, 4096 + 40)
    // DuckDB's checksum error does not name the file it read; the start's message is still a refusal.
    await t.test(damage, (t) => refuses(t, dir, /catalog\.duckdb|Corrupt database file/))
  }
})

t.test('a damaged catalog log (catalog.duckdb.wal): the start refuses naming it; an intact one replays every write', async (t) => {
  // The catalog's own log only exists between checkpoints: a server killed right after its writes leaves one.
  const dir = tempDir('weft-damaged-wal-')
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const s = await startServer({ dataDir: dir, key: KEY, env: FAST_FLUSH })
  const mine = new Ledger()
  for (const kind of ['object', 'table', 'feedback', 'key', 'object', 'table'] as const) await write(s, kind, mine)
  s.proc.kill('SIGKILL')
  await s.exited()
  const wal = path.join(dir, 'catalog.duckdb.wal')
  const size = (await stat(wal).catch(() => ({ size: 0 }))).size
  t.ok(size > 0, `the catalog's log holds the writes (${size} bytes)`)
  // In the middle DuckDB's entry checksum refuses; in the last entry DuckDB alone takes the damage for a torn tail
  // and drops that acknowledged write, so the sums weft records after each commit (catalog.duckdb.wal.sums) refuse.
  for (const at of [Math.floor(size / 2), size - 20, size - 3]) {
    const d = tempDir('weft-damaged-wal-copy-')
    t.teardown(() => rm(d, { recursive: true, force: true }))
    await cp(dir, d, { recursive: true })
    await flip(path.join(d, 'catalog.duckdb.wal'), at)
    await t.test(`byte ${at} of ${size}`, (t) => refuses(t, d, /catalog\.duckdb\.wal/))
  }
  const cut = tempDir('weft-damaged-wal-cut-')
  t.teardown(() => rm(cut, { recursive: true, force: true }))
  await cp(dir, cut, { recursive: true })
  await truncate(path.join(cut, 'catalog.duckdb.wal'), size - 10)
  await t.test('the log cut short of an acknowledged write', (t) => refuses(t, cut, /catalog\.duckdb\.wal.*shorter/))
  const r = await tryStart(dir)
  if (typeof r === 'string') t.fail(`the intact log must replay: ${r}`)
  else {
    await t.test('the intact log: every acknowledged write is there', (t) => verify(t, r, mine))
    await r.stop()
  }
})

t.test('a large table write goes into catalog.duckdb at once; damage to its blocks: the start refuses', async (t) => {
  // 3,000 rows fill row groups of 2,048 (src/catalog/db.ts): DuckDB writes them into the file and its log only names
  // their blocks, so those blocks hold acknowledged writes before any checkpoint. A server killed right after.
  const dir = tempDir('weft-damaged-rows-')
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const s = await startServer({ dataDir: dir, key: KEY, env: FAST_FLUSH })
  const file = path.join(dir, 'catalog.duckdb')
  const before = (await stat(file)).size
  const rows = Array.from({ length: 3000 }, (_, i) => ({ i, text: `row ${i} `.repeat(20) }))
  const r = await fetch(s.url + '/table/create', {
    method: 'POST',
    headers: { ...s.basic(), 'content-type': 'application/json' },
    body: JSON.stringify({ table: { project_id: 'damaged/rows', rows } }),
  })
  t.equal(r.status, 200, 'the table is acknowledged')
  const { digest } = (await r.json()) as { digest: string }
  s.proc.kill('SIGKILL')
  await s.exited()
  const after = (await stat(file)).size
  const wal = (await stat(file + '.wal').catch(() => ({ size: 0 }))).size
  const bytes = rows.reduce((n, row) => n + JSON.stringify(row).length, 0)
  t.ok(after > before, `the rows went into the file (${before} -> ${after} bytes)`)
  t.ok(wal < bytes / 2, `the log holds less than half the rows' bytes (${wal} of ${bytes})`)
  const intact = tempDir('weft-damaged-rows-intact-')
  t.teardown(() => rm(intact, { recursive: true, force: true }))
  await cp(dir, intact, { recursive: true })
  const back = await tryStart(intact)
  if (typeof back === 'string') t.fail(`the intact catalog must open: ${back}`)
  else {
    const q = await fetch(back.url + '/table/query', {
      method: 'POST',
      headers: { ...back.basic(), 'content-type': 'application/json' },
      body: JSON.stringify({ project_id: 'damaged/rows', digest, offset: 2999, limit: 5 }),
    })
    const page = (await q.json()) as { rows: { val: unknown }[] }
    t.same(
      page.rows.map((x) => x.val),
      [rows[2999]],
      'after the kill, the last row is there',
    )
    await back.stop()
  }
  for (const at of [before + Math.floor((after - before) / 3), before + Math.floor(((after - before) * 2) / 3)]) {
    const d = tempDir('weft-damaged-rows-copy-')
    t.teardown(() => rm(d, { recursive: true, force: true }))
    await cp(dir, d, { recursive: true })
    await flip(path.join(d, 'catalog.duckdb'), at)
    await t.test(`byte ${at} of ${after}`, (t) => refuses(t, d, /catalog\.duckdb|Corrupt database file/))
  }
})

t.test('a manifest cut short: the start refuses, naming it', async (t) => {
  const dir = await copy(t)
  const file = path.join(dir, 'calls', 'manifest.json')
  await truncate(file, Math.floor((await stat(file)).size / 2))
  await refuses(t, dir, /manifest\.json cannot be read/)
})

async function waitReady(s: TestServer): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const r = await fetch(s.url + '/ready').catch(() => null)
    if (r?.status === 200) return
    await new Promise((res) => setTimeout(res, 100))
  }
}
