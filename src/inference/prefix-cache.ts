/**
 * Automatic prefix caching, as vLLM does it: a prompt's full blocks of BLOCK_TOKENS tokens are named
 * by a hash chain (each block's hash covers its parent's hash, the request's cache salt and its own
 * token ids), and their keys and values, per layer, are kept in a pool. A later prompt that starts
 * with the same blocks starts its cache from them and computes only the rest. Blocks held by running
 * requests are pinned; the others wait in least-recently-used order and are evicted when the KV
 * budget needs their room.
 */
import { createHash } from 'node:crypto'
import * as tf from '@tensorflow/tfjs'
import type { KVCache } from './kv-cache.js'

/** Tokens per block: vLLM's default block size. Only full blocks are cached and matched. */
export const BLOCK_TOKENS = 16

/** One cached block: per layer its keys and values [kvHeads, BLOCK_TOKENS, headDim]. */
export interface Block {
  readonly hash: string
  readonly keys: tf.Tensor3D[]
  readonly values: tf.Tensor3D[]
  /** Running requests holding it; at 0 it is evictable. */
  refs: number
}

/**
 * The hash chain of the first `count` full blocks of `tokens`. The salt goes into every link, and
 * JSON keeps "no salt" (null) apart from every string, so differently salted prompts never share.
 */
export function blockHashes(tokens: readonly number[], salt: string | null, count: number): string[] {
  const out: string[] = []
  let parent: string | null = null
  for (let i = 0; i < count; i++) {
    const own = tokens.slice(i * BLOCK_TOKENS, (i + 1) * BLOCK_TOKENS)
    parent = createHash('sha256')
      .update(JSON.stringify([parent, salt, own]))
      .digest('hex')
    out.push(parent)
  }
  return out
}

export interface CacheCounts {
  queriedTokens: number
  hitTokens: number
  blocksInUse: number
  blocksCached: number
  tensors: number
}

export class PrefixCache {
  private readonly blocks = new Map<string, Block>()
  /** Blocks no request holds, least recently released first (a Map keeps insertion order). */
  private readonly idle = new Map<string, Block>()
  private queried = 0
  private hits = 0

  constructor(
    private readonly layers: number,
    /**
     * Idle blocks kept at most (in positions). The KV budget admits running requests; without this cap
     * idle blocks would fill the whole budget over time and hold that memory while nothing runs.
     */
    private readonly maxIdleTokens = Infinity,
  ) {}

  /** The cached blocks the chain starts with, up to `max` of them. */
  match(hashes: readonly string[], max: number): Block[] {
    const found: Block[] = []
    for (const h of hashes.slice(0, max)) {
      const b = this.blocks.get(h)
      if (!b) break
      found.push(b)
    }
    return found
  }

  /** A lookup that counts (the request was admitted): for the hit rate. */
  count(promptTokens: number, hitTokens: number): void {
    this.queried += promptTokens
    this.hits += hitTokens
  }

  /** The block of a hash, if cached (not counted as a query). */
  get(hash: string): Block | undefined {
    return this.blocks.get(hash)
  }

  /** Pins blocks for a request: not evictable until released. */
  acquire(blocks: readonly Block[]): void {
    for (const b of blocks) {
      if (b.refs++ === 0) this.idle.delete(b.hash)
    }
  }

  /**
   * Unpins a request's blocks. The last block goes idle first, so a prompt's tail is evicted before
   * its head (a block is unreachable once its parent is gone).
   */
  release(blocks: readonly Block[]): void {
    for (let i = blocks.length - 1; i >= 0; i--) {
      const b = blocks[i]!
      if (--b.refs === 0) this.idle.set(b.hash, b)
    }
    while (this.idleTokens > this.maxIdleTokens && this.evictOne());
  }

  /** Adds a block, pinned once, taking ownership of its tensors; a hash already cached keeps the cached block. */
  insert(hash: string, keys: tf.Tensor3D[], values: tf.Tensor3D[]): Block {
    const had = this.blocks.get(hash)
    if (had) {
      for (const t of [...keys, ...values]) t.dispose()
      this.acquire([had])
      return had
    }
    const b: Block = { hash, keys, values, refs: 1 }
    this.blocks.set(hash, b)
    return b
  }

  /** Positions held by idle blocks: room the KV budget can take back. */
  get idleTokens(): number {
    return this.idle.size * BLOCK_TOKENS
  }

  /** Frees the least recently used idle block; false when none is idle. */
  evictOne(): boolean {
    const first = this.idle.values().next()
    if (first.done) return false
    const b = first.value
    this.idle.delete(b.hash)
    this.blocks.delete(b.hash)
    for (const t of [...b.keys, ...b.values]) t.dispose()
    return true
  }

  /** Starts a sequence's cache from a chain of blocks: per layer, their keys and values end to end. */
  load(cache: KVCache, blocks: readonly Block[]): void {
    if (!blocks.length) return
    for (let l = 0; l < this.layers; l++) {
      cache.keys[l] = tf.concat(
        blocks.map((b) => b.keys[l]!),
        1,
      )
      cache.values[l] = tf.concat(
        blocks.map((b) => b.values[l]!),
        1,
      )
    }
    cache.length = blocks.length * BLOCK_TOKENS
  }

  /**
   * Blocks [from, to) of a sequence's cache as new blocks (or the cached ones of the same hash),
   * each pinned once. One split per layer and tensor, not one slice per block.
   */
  store(cache: KVCache, hashes: readonly string[], from: number, to: number): Block[] {
    if (to <= from) return []
    const n = to - from
    const pieces = (t: tf.Tensor3D) =>
      tf.tidy(() => tf.split(t.slice([0, from * BLOCK_TOKENS, 0], [-1, n * BLOCK_TOKENS, -1]), n, 1) as tf.Tensor3D[])
    const keys = cache.keys.map((t) => pieces(t!))
    const values = cache.values.map((t) => pieces(t!))
    const out: Block[] = []
    for (let i = 0; i < n; i++)
      out.push(
        this.insert(
          hashes[from + i]!,
          keys.map((k) => k[i]!),
          values.map((v) => v[i]!),
        ),
      )
    return out
  }

  stats(): CacheCounts {
    return {
      queriedTokens: this.queried,
      hitTokens: this.hits,
      blocksInUse: this.blocks.size - this.idle.size,
      blocksCached: this.blocks.size,
      tensors: this.blocks.size * 2 * this.layers,
    }
  }

  dispose(): void {
    for (const b of this.blocks.values()) for (const t of [...b.keys, ...b.values]) t.dispose()
    this.blocks.clear()
    this.idle.clear()
  }
}
