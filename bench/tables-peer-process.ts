/**
 * The ClickHouse peer run in a child process (tables-peer-child.ts), with the same methods as ClickHousePeer, each
 * answering asynchronously. With chdb inside the bench process its V8 helper threads (~30 % of a core each) and its
 * 5-6 GB heap slowed that process's client, and so weft's timed reads, by ~1.5x (bench/README.md, 2026-12-06). The
 * calls cross a pipe (Node's IPC with structured clone): `ipcMs` measures what one round trip adds to the peer's times.
 */
import { fork, type ChildProcess } from 'node:child_process'
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { ROOT_DIR } from '../src/core/version.js'
import type { ClickHousePeer } from './tables-peer.js'

type Async<T> = { [K in keyof T]: T[K] extends (...a: infer A) => infer R ? (...a: A) => Promise<Awaited<R>> : never }
export type RemotePeer = Async<Pick<ClickHousePeer, PeerMethod>> & {
  close(): Promise<void>
  ipcMs(n: number): Promise<number[]>
  pid: number
}
type PeerMethod =
  'create' | 'append' | 'insertTableOnly' | 'insertObjects' | 'page' | 'sortedPage' | 'latestObjects' | 'readRefs' | 'settleMerges'

interface Answer {
  id: number
  result?: unknown
  error?: string
  ms?: number
}

/** Whether chdb is installed (bench/peer-deps), without loading it into this process. */
export function chdbInstalled(): boolean {
  try {
    createRequire(path.join(ROOT_DIR, 'bench', 'peer-deps', 'package.json')).resolve('chdb')
    return true
  } catch {
    return false
  }
}

/** Starts the peer's process on a session in `dir`; resolves once chdb has loaded and made its schema. */
export async function startPeer(dir: string): Promise<RemotePeer> {
  const child: ChildProcess = fork(fileURLToPath(new URL('./tables-peer-child.js', import.meta.url)), [dir], {
    serialization: 'advanced',
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  const waiting = new Map<number, { resolve: (x: unknown) => void; reject: (e: Error) => void }>()
  let exited: Error | null = null
  const ready = new Promise<void>((resolve, reject) => {
    waiting.set(0, { resolve: () => resolve(), reject })
  })
  child.on('message', (a: Answer) => {
    const w = waiting.get(a.id)
    waiting.delete(a.id)
    if (a.error !== undefined) w?.reject(new Error(a.error))
    else w?.resolve(a.result)
  })
  child.on('exit', (code, signal) => {
    exited = new Error(`peer process exited (${code ?? signal})`)
    for (const w of waiting.values()) w.reject(exited)
    waiting.clear()
  })
  await ready
  let next = 1
  const call = (method: string, ...args: unknown[]): Promise<never> =>
    new Promise((resolve, reject) => {
      if (exited) return reject(exited)
      const id = next++
      waiting.set(id, { resolve: resolve as (x: unknown) => void, reject })
      child.send({ id, method, args })
    })
  const methods: PeerMethod[] = [
    'create',
    'append',
    'insertTableOnly',
    'insertObjects',
    'page',
    'sortedPage',
    'latestObjects',
    'readRefs',
    'settleMerges',
  ]
  const remote = Object.fromEntries(methods.map((m) => [m, (...args: unknown[]) => call(m, ...args)])) as unknown as RemotePeer
  remote.pid = child.pid!
  remote.close = async () => {
    if (exited) return
    const gone = new Promise((r) => child.once('exit', r))
    await call('close').catch(() => {})
    await gone
  }
  remote.ipcMs = async (n) => {
    const out: number[] = []
    for (let i = 0; i < n; i++) {
      const t0 = performance.now()
      await call('ping')
      out.push(performance.now() - t0)
    }
    return out
  }
  return remote
}
