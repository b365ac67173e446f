/**
 * Grammar compilation and token masks with xgrammar (vLLM's default structured-output backend), for
 * one model's vocabulary. Compiled grammars are cached by constraint (LRU, bounded), so a repeated
 * schema costs nothing at admission; each sequence gets its own matcher.
 */
import type { CompiledGrammar, GrammarCompiler, GrammarMatcher, TokenizerInfo } from '@mlc-ai/web-xgrammar'
import { GrammarError, constraintKey, type Constraint } from './constraint.js'
import { loadXGrammar, type ErrorSink, type XGrammar } from './xgrammar-module.js'
import type { GrammarVocab } from './vocab.js'
import { rewriteBoundedStrings } from './schema-rewrite.js'
import { UTF8_START, maskInvalidUtf8, tokenBytes, utf8Run, type TokenBytes, type Utf8State } from './utf8.js'

export { GrammarError }

/** One xgrammar instance with the vocabulary loaded, and how many compiles it has seen fail. */
interface Runtime {
  xg: XGrammar
  sink: ErrorSink
  info: TokenizerInfo
  compiler: GrammarCompiler
  failures: number
}

/** Failed compiles an instance may see before it is replaced (see xgrammar-module.ts for why). */
const MAX_FAILURES = 4

/** vLLM's messages for a constraint xgrammar cannot compile. */
const FAILURE: Record<Constraint['kind'], string> = {
  json: 'The provided JSON schema contains features not supported by xgrammar.',
  json_object: 'The provided JSON schema contains features not supported by xgrammar.',
  regex: 'Failed to transform regex into a grammar:',
  choice: 'Failed to transform choices into a grammar:',
  grammar: 'Invalid grammar specification.',
  structural_tag: 'Invalid structural tag specification.',
}

/** The choices as an EBNF alternation of string literals (vLLM's choice_as_grammar). */
export function choiceGrammar(choices: string[]): string {
  return `root ::= ${choices.map((c) => JSON.stringify(c)).join(' | ')}`
}

export interface Compiled {
  grammar: CompiledGrammar
  /** The instance it was compiled in: its matchers must come from the same one. */
  runtime: Runtime
}

export interface CacheWatch {
  evicted?(key: string): void
  cleared?(): void
}

export class Grammars {
  private runtime: Promise<Runtime> | null = null
  private readonly cache = new Map<string, Compiled>()
  private bytes: TokenBytes | null = null
  /** Compiles that hit the cache / did the work, for /metrics-style reporting and tests. */
  hits = 0
  misses = 0

  constructor(
    private readonly vocab: GrammarVocab,
    private readonly capacity = 64,
    /** Told which cached grammars go, so that a lane's owner can mirror what it holds. */
    private readonly watch: CacheWatch = {},
  ) {}

  private current(): Promise<Runtime> {
    this.runtime ??= (async () => {
      const { xg, sink, start } = loadXGrammar()
      const v = this.vocab
      const info = await start(() => xg.TokenizerInfo.createTokenizerInfo(v.encoded, v.type, v.prependSpace, v.size, v.stopIds))
      // xgrammar's own cache is off: ours is bounded and is dropped with a retired instance.
      const compiler = await xg.GrammarCompiler.createGrammarCompiler(info, false)
      return { xg, sink, info, compiler, failures: 0 }
    })()
    return this.runtime
  }

  /** Loads the xgrammar instance and the vocabulary now rather than in the first compile. */
  async warm(): Promise<void> {
    await this.current()
  }

  /** The compiled grammar of a constraint, from the cache or compiled now; GrammarError when xgrammar rejects it. */
  async compile(c: Constraint): Promise<Compiled> {
    const key = constraintKey(c)
    const hit = this.cache.get(key)
    if (hit) {
      this.cache.delete(key)
      this.cache.set(key, hit)
      this.hits++
      return hit
    }
    const rt = await this.current()
    rt.sink.lines.length = 0
    let grammar: CompiledGrammar
    try {
      grammar = await compileIn(rt, c)
    } catch (e) {
      if (++rt.failures >= MAX_FAILURES && this.runtime) {
        // Matchers made from it keep it alive until they finish; new work goes to a fresh instance.
        this.runtime = null
        this.cache.clear()
        this.watch.cleared?.()
      }
      throw new GrammarError(`${FAILURE[c.kind]} ${reason(rt.sink, e)}`.trim())
    }
    this.misses++
    const compiled = { grammar, runtime: rt }
    this.cache.set(key, compiled)
    if (this.cache.size > this.capacity) {
      const [oldest, old] = this.cache.entries().next().value as [string, Compiled]
      this.cache.delete(oldest)
      old.grammar.dispose()
      this.watch.evicted?.(oldest)
    }
    return compiled
  }

  /** A matcher for one sequence; `stopIds` adds the request's stop token ids to the model's end-of-sequence ids. */
  async matcher(c: Compiled, stopIds: number[] | null): Promise<TokenMatcher> {
    const ids = stopIds && stopIds.length ? [...new Set([...this.vocab.stopIds, ...stopIds])] : undefined
    const m = await c.runtime.xg.GrammarMatcher.createGrammarMatcher(c.grammar, ids)
    this.bytes ??= tokenBytes(this.vocab)
    return new TokenMatcher(m, this.bytes)
  }
}

/** The compiled grammar of one constraint in one instance. */
async function compileIn(rt: Runtime, c: Constraint): Promise<CompiledGrammar> {
  const { compiler, xg } = rt
  switch (c.kind) {
    case 'json':
      return compiler.compileJSONSchema(JSON.stringify(rewriteBoundedStrings(JSON.parse(c.spec))), c.anyWhitespace, -1, undefined, true)
    case 'json_object':
      return compiler.compileJSONSchema('{"type": "object"}', c.anyWhitespace, -1, undefined, true)
    case 'regex':
      return compiler.compileStructuralTag({ type: 'structural_tag', format: { type: 'regex', pattern: c.spec } })
    case 'choice':
      return compiler.compileGrammar(choiceGrammar(JSON.parse(c.spec) as string[]))
    case 'grammar':
      return compiler.compileGrammar(c.spec)
    case 'structural_tag': {
      let tag: { structures?: { begin: string; schema: unknown; end: string }[]; triggers?: string[] } & Record<string, unknown>
      try {
        // The schemas inside a tag need the same bounded-string workaround as a plain JSON schema; the
        // rewrite touches only string schemas, so the tag's own objects pass through it unchanged.
        tag = rewriteBoundedStrings(JSON.parse(c.spec)) as typeof tag
      } catch {
        throw new Error('not JSON')
      }
      if (Array.isArray(tag.structures)) {
        // The older form: begin / schema / end items and their trigger prefixes.
        const items = tag.structures.map((s) => new xg.StructuralTagItem(s.begin, (s.schema ?? {}) as Record<string, unknown>, s.end))
        return compiler.compileStructuralTag(items, tag.triggers ?? [])
      }
      return compiler.compileStructuralTag(tag)
    }
  }
}

/** The library's own words for a failure: its last FATAL line without the source location. */
function reason(sink: ErrorSink, e: unknown): string {
  const fatal = [...sink.lines].reverse().find((l) => l.includes('[FATAL]'))
  if (fatal) return fatal.replace(/^.*?\[FATAL\]\s*\S+:\d+:\s*/, '').trim()
  const msg = e instanceof Error ? e.message : String(e)
  // A C++ exception thrown through WebAssembly arrives as a bare pointer (a number): no words to pass on.
  return /^Aborted\(/.test(msg) || /^\d+$/.test(msg.trim()) ? '' : msg
}

/** One sequence's position in its grammar: which tokens may come next, and the tokens taken. */
export class TokenMatcher {
  private utf8: Utf8State = UTF8_START

  constructor(
    private readonly m: GrammarMatcher,
    private readonly bytes: TokenBytes,
  ) {}

  /** Bit i of the mask (word i >> 5, bit i & 31) is set when token i may come next. */
  async nextMask(): Promise<Int32Array> {
    const mask = await this.m.getNextTokenBitmask()
    maskInvalidUtf8(mask, this.utf8, this.bytes)
    return mask
  }

  /** Advances past a sampled token; false when the grammar does not allow it (it then stays where it was). */
  accept(token: number): boolean {
    const ok = this.m.acceptToken(token)
    const b = this.bytes.bytes[token]
    if (ok && b) this.utf8 = utf8Run(this.utf8, b) ?? UTF8_START
    return ok
  }

  get terminated(): boolean {
    return this.m.isTerminated()
  }

  dispose(): void {
    this.m.dispose()
  }
}
