/**
 * Where a served token's time goes over HTTP (issue 17): the real server on the bench's 101M model, one
 * inference worker, streamed chat completions at 1, 16 and 64 streams at once. The server runs under
 * `--cpu-prof` (one profile per thread); the samples taken while the streams run are split by what they were
 * doing, per thread: in the inference worker the model step, sampling, the stop checks and detokenization, and
 * posting events to the main thread; in the main thread taking those messages in, framing SSE chunks, writing
 * them, recording the call, and the HTTP request itself. Beside it, what the client sees: the gaps between a
 * stream's tokens.
 *   node dist/bench/serve-profile.js [--concurrency 1,16,64] [--tokens 64] [--rounds 8,2,1] [--model 100m|tiny] [--profile false]
 * The threads' CPU times come from /proc; with --cpu-prof, V8's sampling threads (v8:ProfEvntProc) add CPU of their own.
 * Writes bench/results/serve-profile-<stamp>.json.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { parseFlags } from '../src/core/config.js'
import { ROOT_DIR } from '../src/core/version.js'
import { makeTinyModel } from '../src/fixtures/tiny-model.js'
import { spread, startWeft } from './util.js'

const { flags } = parseFlags(process.argv.slice(2))
const LEVELS = (flags.concurrency ?? '1,16,64').split(',').map(Number)
const ROUNDS = (flags.rounds ?? '8,2,1').split(',').map(Number)
const TOKENS = Number(flags.tokens ?? 64)
// --profile false: no --cpu-prof (its sampling threads cost CPU of their own), only the threads' CPU times.
const PROFILE = flags.profile !== 'false'
const SHAPES = { tiny: {}, '100m': { hidden: 768, layers: 16, heads: 12, kvHeads: 4, intermediate: 2048, seed: 100 } }
const KEY = 'bench-key'
const messages = [
  { role: 'system', content: 'You are a helpful assistant.' },
  { role: 'user', content: 'Tell me about looms, weaving and the history of cloth, briefly.' },
]

/** A V8 CPU profile as --cpu-prof writes it. */
interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string }; children?: number[] }[]
  startTime: number
  samples: number[]
  timeDeltas: number[]
}

/** A category of samples: the first rule (innermost frame first) a stack's frame matches names it. */
type Rule = [name: string, test: (fn: string, url: string) => boolean]
const file = (name: string) => (_: string, url: string) => url.includes(name)
const fnIn = (fns: string[], name: string) => (fn: string, url: string) => url.includes(name) && fns.includes(fn)

const WORKER: Rule[] = [
  ['post events (postMessage, structured clone)', (fn) => fn === 'postMessage'],
  ['detokenize', fnIn(['decode'], '/inference/tokenizer.js')],
  ['sampling', file('/inference/sampler.js')],
  ['model step (forward)', file('/inference/llama')],
  ['stop checks, events (output.js)', file('/inference/output.js')],
  ['scheduler, engine loop', file('/inference/engine.js')],
  ['take commands (render, tokenize prompt)', (_, url) => url.includes('/inference/request.js') || url.includes('/inference/worker.js')],
]
const MAIN: Rule[] = [
  ['SSE framing (JSON.stringify of chunks)', file('/api/chat/stream.js')],
  ['write to the socket (uWS)', fnIn(['write', 'beginStream', 'endStream'], '/http/uws.js')],
  ['record the call', (_, url) => url.includes('/api/chat/record.js') || url.includes('/calls/')],
  ['take worker messages (deserialize, dispatch)', (_, url) => /inference\/client\.js|internal\/worker|messageport/.test(url)],
  ['HTTP request: parse, route, validate, reply', (_, url) => url.includes('/http/') || url.includes('/api/')],
]

/** ms of samples in [from, to] (µs, the monotonic clock) by category; idle, GC and the rest named as V8 names them. */
function split(p: CpuProfile, rules: Rule[], from: number, to: number): Record<string, number> {
  const parent = new Map<number, number>()
  const byId = new Map(p.nodes.map((n) => [n.id, n]))
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
  const memo = new Map<number, string>()
  const category = (id: number): string => {
    const hit = memo.get(id)
    if (hit) return hit
    const leaf = byId.get(id)!.callFrame.functionName
    let name = leaf.startsWith('(') ? leaf : 'other'
    for (let at: number | undefined = id; at !== undefined && name === 'other'; at = parent.get(at)) {
      const { functionName, url } = byId.get(at)!.callFrame
      const r = rules.find(([, test]) => test(functionName, url))
      if (r) name = r[0]
    }
    memo.set(id, name)
    return name
  }
  const out: Record<string, number> = {}
  let t = p.startTime
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i]!
    // A sample covers the time since the one before it.
    if (t < from || t > to) continue
    const c = category(p.samples[i]!)
    out[c] = (out[c] ?? 0) + p.timeDeltas[i]! / 1000
  }
  return out
}

/** CPU ms of each thread of a process so far (utime + stime from /proc, in clock ticks of 10 ms), by thread id, with its name. */
function threadCpu(pid: number): Map<number, { name: string; ms: number }> {
  const out = new Map<number, { name: string; ms: number }>()
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8')
      // The name is in parentheses and may hold spaces; the fields after it start at the state (field 3).
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))
      out.set(Number(tid), { name, ms: (Number(rest[11]) + Number(rest[12])) * 10 })
    } catch {
      // A thread that ended between the listing and the read.
    }
  }
  return out
}

/**
 * The CPU the server's threads used between two readings, per token: the main thread (its id is the process's), the
 * busiest other thread (the inference worker), and all the others together (V8's and libuv's helpers, the pools).
 */
function cpuSplit(pid: number, before: ReturnType<typeof threadCpu>, after: ReturnType<typeof threadCpu>, tokens: number) {
  const used = [...after].map(([tid, t]) => ({ tid, name: t.name, ms: t.ms - (before.get(tid)?.ms ?? 0) }))
  const main = used.find((t) => t.tid === pid)!
  // V8's own threads (the profiler's v8:ProfEvntProc, its GC helpers) are named; JS threads are all `node`.
  const worker = used.filter((t) => t.tid !== pid && !t.name.startsWith('v8:')).sort((a, b) => b.ms - a.ms)[0]!
  const others = used.reduce((s, t) => s + t.ms, 0) - main.ms - worker.ms
  const per = (ms: number) => Math.round((ms * 1000) / tokens)
  return { main_us: per(main.ms), worker_us: per(worker.ms), worker_thread: worker.name, other_threads_us: per(others) }
}

/** µs on the monotonic clock V8's profiler stamps samples with. */
const monotonicUs = () => Number(process.hrtime.bigint() / 1000n)

/** One streamed completion: the arrival times (ms) of its content chunks. */
async function stream(url: string): Promise<number[]> {
  const res = await fetch(url + '/v1/chat/completions', {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages, max_tokens: TOKENS, temperature: 0, ignore_eos: true, stream: true }),
  })
  const reader = res.body!.getReader()
  const at: number[] = []
  let buf = ''
  for (;;) {
    const { value, done } = await reader.read()
    if (done) break
    buf += Buffer.from(value).toString()
    let cut
    while ((cut = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, cut)
      buf = buf.slice(cut + 2)
      if (!ev.startsWith('data: {')) continue
      const c = JSON.parse(ev.slice(6)).choices?.[0]
      if (c && !c.delta?.role) at.push(performance.now())
    }
  }
  return at
}

/** The profiles --cpu-prof wrote: the main thread's and the inference worker's (the one that ran engine.js). */
function readProfiles(dir: string): { main: CpuProfile; worker: CpuProfile } {
  const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'))
  let main: CpuProfile | null = null
  let worker: CpuProfile | null = null
  for (const f of files) {
    const text = readFileSync(path.join(dir, f), 'utf8')
    // File names end in .<pid>.<thread id>.<sequence>.cpuprofile: thread 0 is the main thread.
    if (/\.\d+\.0\.\d+\.cpuprofile$/.test(f)) main = JSON.parse(text) as CpuProfile
    else if (text.includes('/inference/engine.js')) worker = JSON.parse(text) as CpuProfile
  }
  if (!main || !worker) throw new Error(`${dir}: no main-thread or inference-worker profile among ${files.join(', ')}`)
  return { main, worker }
}

async function level(modelDir: string, streams: number, rounds: number) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'weft-serve-profile-'))
  const profDir = path.join(dir, 'prof')
  mkdirSync(profDir)
  process.env.WEFT_BENCH_NODE_ARGS = PROFILE ? `--cpu-prof --cpu-prof-dir=${profDir} --cpu-prof-interval 250` : ''
  const server = await startWeft({
    root: ROOT_DIR,
    dataDir: path.join(dir, 'data'),
    key: KEY,
    env: { WEFT_ACCESS_LOG: 'false', WEFT_MODEL: modelDir, WEFT_SERVED_MODEL_NAME: 'm', WEFT_MAX_NUM_SEQS: '64', WEFT_MODEL_REPLICAS: '1' },
  })
  // Warm-up (JIT, the wasm heap's growth), outside the window.
  await Promise.all(Array.from({ length: streams }, () => stream(server.url)))
  const load0 = os.loadavg()[0]!
  const cpu0 = threadCpu(server.pid)
  const client0 = process.cpuUsage()
  const from = monotonicUs()
  const t0 = performance.now()
  const arrivals: number[][] = []
  for (let r = 0; r < rounds; r++) arrivals.push(...(await Promise.all(Array.from({ length: streams }, () => stream(server.url)))))
  const wallMs = performance.now() - t0
  const to = monotonicUs()
  const client = process.cpuUsage(client0)
  const cpu1 = threadCpu(server.pid)
  const load1 = os.loadavg()[0]!
  await server.stop()
  const profiles = PROFILE ? readProfiles(profDir) : null
  rmSync(dir, { recursive: true, force: true })
  const tokens = arrivals.reduce((s, a) => s + a.length, 0)
  const gaps = arrivals.flatMap((a) => a.slice(1).map((x, i) => x - a[i]!))
  const perToken = (m: Record<string, number>) =>
    Object.fromEntries(Object.entries(m).map(([k, ms]) => [k, Math.round((ms * 1000) / tokens)]))
  return {
    streams,
    rounds,
    tokens,
    wall_ms: Math.round(wallMs),
    tokens_per_s: Math.round((tokens * 1000) / wallMs),
    load: [load0, load1],
    client_gap_ms: { ...spread(gaps), p90: gaps.sort((a, b) => a - b)[Math.floor(gaps.length * 0.9)] },
    // CPU time per token (µs) of the server's threads (/proc) and of this client process (parsing the SSE streams).
    cpu_us_per_token: { ...cpuSplit(server.pid, cpu0, cpu1, tokens), client_us: Math.round((client.user + client.system) / tokens) },
    // Profile samples per token (µs of the thread's time, by category; (idle): waiting). Samples are taken on wall time:
    // a thread that is runnable but not running counts where it stopped, so on a busy machine these exceed its CPU time.
    worker_us_per_token: profiles ? perToken(split(profiles.worker, WORKER, from, to)) : {},
    main_us_per_token: profiles ? perToken(split(profiles.main, MAIN, from, to)) : {},
  }
}

async function main(): Promise<void> {
  const shape = (flags.model ?? '100m') as keyof typeof SHAPES
  const dir = mkdtempSync(path.join(os.tmpdir(), 'weft-serve-model-'))
  await makeTinyModel(dir, SHAPES[shape])
  const results = []
  for (const [i, streams] of LEVELS.entries()) {
    const r = await level(dir, streams, ROUNDS[i] ?? 1)
    results.push(r)
    const show = (m: Record<string, number>) =>
      Object.entries(m)
        .sort((a, b) => b[1] - a[1])
        .map(([k, v]) => `    ${k.padEnd(48)} ${String(v).padStart(9)} µs/token`)
        .join('\n')
    const g = r.client_gap_ms
    process.stdout.write(
      `${streams} streams x ${r.rounds}: ${r.tokens} tokens in ${r.wall_ms} ms (${r.tokens_per_s} tok/s), load ${r.load.map((x) => x.toFixed(1)).join(' -> ')}\n` +
        `  client gaps between a stream's tokens: min ${g.min.toFixed(1)} / median ${g.median.toFixed(1)} / p90 ${g.p90!.toFixed(1)} / max ${g.max.toFixed(1)} ms\n` +
        `  CPU µs per token: ${JSON.stringify(r.cpu_us_per_token)}\n` +
        `  inference worker, profile:\n${show(r.worker_us_per_token)}\n  main thread, profile:\n${show(r.main_us_per_token)}\n`,
    )
  }
  rmSync(dir, { recursive: true, force: true })
  const stamp = new Date().toISOString().replace(/[:.]/g, '-')
  const out = path.join(ROOT_DIR, 'bench', 'results', `serve-profile-${stamp}.json`)
  writeFileSync(
    out,
    JSON.stringify({ bench: 'serve-profile', model: shape, tokens_per_stream: TOKENS, date: new Date().toISOString(), results }, null, 2) +
      '\n',
  )
  process.stdout.write(`wrote ${path.relative(ROOT_DIR, out)}\n`)
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
