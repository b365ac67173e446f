import { GrammarError, type Constraint } from './constraint.js'

/**
 * Bounds on a JSON schema checked before it reaches xgrammar: past them the WebAssembly build runs out of
 * memory ("memory access out of bounds") or compiles for minutes. Real response schemas stay far below them.
 */
export const SCHEMA_LIMITS = { depth: 64, properties: 1000, nodes: 20_000 } as const

interface Tally {
  depth: number
  properties: number
  nodes: number
}

function walk(v: unknown, depth: number, t: Tally): void {
  if (v === null || typeof v !== 'object') return
  t.nodes++
  if (depth > t.depth) t.depth = depth
  // Stops early: a hostile schema is not walked further than it takes to refuse it.
  if (t.depth > SCHEMA_LIMITS.depth || t.nodes > SCHEMA_LIMITS.nodes) return
  if (Array.isArray(v)) {
    for (const x of v) walk(x, depth + 1, t)
    return
  }
  const props = (v as Record<string, unknown>).properties
  if (props && typeof props === 'object' && !Array.isArray(props)) t.properties += Object.keys(props).length
  for (const x of Object.values(v)) walk(x, depth + 1, t)
}

/** Throws a GrammarError (a 400, in vLLM's words for a schema it cannot use) when a schema is past the bounds. */
export function checkSchemaBounds(schema: unknown): void {
  const t: Tally = { depth: 0, properties: 0, nodes: 0 }
  walk(schema, 1, t)
  const L = SCHEMA_LIMITS
  const past =
    t.depth > L.depth
      ? `it is nested more than ${L.depth} levels deep`
      : t.nodes > L.nodes
        ? `it has more than ${L.nodes} objects and arrays`
        : t.properties > L.properties
          ? `it has ${t.properties} properties in all, more than ${L.properties}`
          : null
  if (past) throw new GrammarError(`The provided JSON schema is too large to compile: ${past}.`)
}

/** The constraint's schemas within the bounds (JSON schemas and the schemas inside a structural tag). */
export function checkConstraintBounds(c: Constraint): void {
  if (c.kind !== 'json' && c.kind !== 'structural_tag') return
  let parsed: unknown
  try {
    parsed = JSON.parse(c.spec)
  } catch {
    return // xgrammar's own message says what is wrong with it
  }
  checkSchemaBounds(parsed)
}
