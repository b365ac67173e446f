/**
 * Automatic prefix caching, as vLLM does it: a prompt's full blocks of BLOCK_TOKENS tokens are named
 * by a hash chain (each block's hash covers its parent's hash, the request's cache salt and its own
 * token ids), and their keys and values, per layer, are kept in a pool. A later prompt that starts
 * with the same blocks starts its cache from them and computes only the rest. Blocks held by running
 * requests are pinned; the others wait in least-recently-used order and are evicted when the KV
 * budget needs their room.
 */
import { createHash } from 'node:crypto'
import type { KVCache } from './kv-cache.js'

/** Tokens per block: vLLM's default block size. Only full blocks are cached and matched. */
export const BLOCK_TOKENS = 16

/** One cached block: per layer its keys and values, position-major as in KVCache ([BLOCK_TOKENS, kvHeads × headDim]). */
export interface Block {
  readonly hash: string
  readonly keys: Float32Array[]
  readonly values: Float32Array[]
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

  /** Adds a block, pinned once; a hash already cached keeps the cached block. */
  insert(hash: string, keys: Float32Array[], values: Float32Array[]): Block {
    const had = this.blocks.get(hash)
    if (had) {
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
    return true
  }

  /** Starts a sequence's (empty) cache from a chain of blocks: per layer, their keys and values end to end. */
  load(cache: KVCache, blocks: readonly Block[]): void {
    if (!blocks.length) return
    cache.reserve(blocks.length * BLOCK_TOKENS)
    const size = BLOCK_TOKENS * cache.width
    for (let l = 0; l < this.layers; l++) {
      blocks.forEach((b, i) => {
        cache.keys[l]!.set(b.keys[l]!, i * size)
        cache.values[l]!.set(b.values[l]!, i * size)
      })
    }
    cache.length = blocks.length * BLOCK_TOKENS
  }

  /** Blocks [from, to) of a sequence's cache as new blocks (copies; or the cached ones of the same hash), each pinned once. */
  store(cache: KVCache, hashes: readonly string[], from: number, to: number): Block[] {
    const size = BLOCK_TOKENS * cache.width
    const out: Block[] = []
    for (let i = from; i < to; i++) {
      const piece = (a: Float32Array) => a.slice(i * size, (i + 1) * size)
      out.push(this.insert(hashes[i]!, cache.keys.map(piece), cache.values.map(piece)))
    }
    return out
  }

  stats(): CacheCounts {
    return {
      queriedTokens: this.queried,
      hitTokens: this.hits,
      blocksInUse: this.blocks.size - this.idle.size,
      blocksCached: this.blocks.size,
      // Blocks hold plain arrays (outside the TF.js engine) since the KV caches moved out of it.
      tensors: 0,
    }
  }

  dispose(): void {
    this.blocks.clear()
    this.idle.clear()
  }
}
