/**
 * A structured-output constraint as the engine takes it: one kind and its specification, already
 * checked for shape by the HTTP side (which maps structured_outputs, response_format and the legacy
 * guided_* fields onto it).
 */
export type ConstraintKind = 'json' | 'json_object' | 'regex' | 'choice' | 'grammar' | 'structural_tag'

export interface Constraint {
  kind: ConstraintKind
  /**
   * json: the JSON Schema as JSON text; regex and grammar: as given; choice: the choices as a JSON
   * array; structural_tag: JSON text; json_object: empty.
   */
  spec: string
  /** Optional whitespace allowed between JSON tokens (false: `disable_any_whitespace`). */
  anyWhitespace: boolean
}

/** One key per distinct grammar: what the compiled-grammar cache is keyed by. */
export function constraintKey(c: Constraint): string {
  return `${c.kind}\u0000${c.anyWhitespace ? 1 : 0}\u0000${c.spec}`
}

/** A constraint the grammar engine rejects: the client's mistake, a 400. */
export class GrammarError extends Error {}

/** One sequence's place in its grammar, as the engine drives it. */
export interface SequenceGrammar {
  /** Which tokens may come next (bit i of word i >> 5); null once the grammar is complete (only end-of-sequence then). */
  nextMask(): Promise<Int32Array | null>
  /** Advances past a sampled token. */
  accept(token: number): void
  dispose(): void
}

/** Where the engine gets its grammars: compiled (or cached) for a constraint, one matcher per sequence. */
export interface GrammarSource {
  /** GrammarError when the grammar engine rejects the constraint; `stopIds` adds the request's stop token ids. */
  open(c: Constraint, stopIds: number[] | null, n: number): Promise<SequenceGrammar[]>
  close(): Promise<void>
}
