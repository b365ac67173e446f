import { createRequire } from 'node:module'
import { DomainError } from '../core/errors.js'
import type { FeedbackCreateReq } from '../schemas/feedback.js'

/** Weave's limit on a serialised payload. */
export const MAX_PAYLOAD_BYTES = 1 << 20
export const MAX_NOTE_CHARS = 1024

const REACTION = 'wandb.reaction.1'
const NOTE = 'wandb.note.1'
const ANNOTATION = 'wandb.annotation.'
const RUNNABLE = 'wandb.runnable.'

/** The parts of emojibase-data's entries read here. */
interface EmojiEntry {
  label: string
  hexcode: string
  skins?: EmojiEntry[]
}
interface Known {
  label: string
  /** The toneless emoji a skin-toned one belongs to; unset for toneless ones. */
  base?: string
}

/** Variation selector 16 is optional in what clients send, so it is no part of the lookup key. */
const keyOf = (hex: string) =>
  hex
    .split('-')
    .filter((h) => h.toUpperCase() !== 'FE0F')
    .join('-')
    .toUpperCase()
const fromHex = (hex: string) => String.fromCodePoint(...hex.split('-').map((h) => parseInt(h, 16)))
const hexOf = (s: string) => keyOf([...s].map((c) => c.codePointAt(0)!.toString(16)).join('-'))

let known: Map<string, Known> | null = null

/** Every emoji of the Unicode emoji list (emojibase-data), skin-toned variants pointing at their base; loaded on first use. */
function emojiTable(): Map<string, Known> {
  if (known) return known
  const data = createRequire(import.meta.url)('emojibase-data/en/data.json') as EmojiEntry[]
  known = new Map()
  for (const e of data) {
    known.set(keyOf(e.hexcode), { label: e.label })
    for (const s of e.skins ?? []) known.set(keyOf(s.hexcode), { label: s.label, base: e.hexcode })
  }
  return known
}

/** The CLDR name as Weave's `emoji.demojize` writes it: `thumbs up: medium skin tone` → `:thumbs_up_medium_skin_tone:`. */
const alias = (label: string) => `:${label.replace(/:/g, '').trim().replace(/\s+/g, '_')}:`

/** A reaction's payload with the fields Weave adds: alias, detoned (skin tone removed) and its alias. */
function reactionPayload(payload: Record<string, unknown>): Record<string, unknown> {
  const emoji = payload.emoji
  const table = emojiTable()
  const found = typeof emoji === 'string' ? table.get(hexOf(emoji)) : undefined
  if (typeof emoji !== 'string' || !found) throw new DomainError(400, 'Value of emoji key in payload must be exactly one emoji')
  const detoned = found.base ? fromHex(found.base) : emoji
  const base = found.base ? table.get(keyOf(found.base))! : found
  return { ...payload, alias: alias(found.label), detoned, detoned_alias: alias(base.label) }
}

function checkNote(payload: Record<string, unknown>): void {
  const note = payload.note
  if (typeof note !== 'string') throw new DomainError(400, 'A note payload must be {"note": <string>}')
  const n = [...note].length
  if (n < 1 || n > MAX_NOTE_CHARS) throw new DomainError(400, `Note must be 1 to ${MAX_NOTE_CHARS} characters long, got ${n}`)
}

/** `weave:///<entity>/<project>/<kind>/<name>:<digest>`, or null. */
function parseRef(ref: string): { project: string; kind: string; name: string } | null {
  const m = /^weave:\/\/\/([^/]+\/[^/]+)\/(op|object|call)\/([^/:]+)(?::([^/]+))?$/.exec(ref)
  return m ? { project: m[1]!, kind: m[2]!, name: m[3]! } : null
}

/** Weave's payload models for these types: the key must be present (its value may be anything, null included). */
function requireKey(req: FeedbackCreateReq, key: 'value' | 'output'): void {
  if (!Object.hasOwn(req.payload, key))
    throw new DomainError(400, `Invalid payload for feedback_type ${req.feedback_type}: the payload needs a ${JSON.stringify(key)} key`)
}

function checkAnnotation(req: FeedbackCreateReq, name: string): void {
  const ref = req.annotation_ref ? parseRef(req.annotation_ref) : null
  if (!req.annotation_ref) throw new DomainError(400, 'annotation_ref is required for annotation feedback')
  if (!ref || ref.kind !== 'object' || ref.name !== name || ref.project !== req.project_id)
    throw new DomainError(400, `annotation_ref must be an object ref of this project named ${JSON.stringify(name)}`)
  requireKey(req, 'value')
}

function checkRunnable(req: FeedbackCreateReq, name: string): void {
  if (!req.runnable_ref) throw new DomainError(400, 'runnable_ref is required for runnable feedback')
  const ref = parseRef(req.runnable_ref)
  if (!ref || ref.kind === 'call' || ref.name !== name || ref.project !== req.project_id)
    throw new DomainError(400, `runnable_ref must be an op or object ref of this project named ${JSON.stringify(name)}`)
  requireKey(req, 'output')
  if (ref.kind !== 'op') return
  if (!req.call_ref) throw new DomainError(400, 'call_ref is required for runnable feedback from an op')
  const call = parseRef(req.call_ref)
  if (!call || call.kind !== 'call' || call.project !== req.project_id)
    throw new DomainError(400, 'call_ref must be a call ref of this project')
}

/** Refs belong to annotation and runnable feedback only (Weave's rule). */
function checkRefsAllowed(req: FeedbackCreateReq, annotation: boolean, runnable: boolean): void {
  if (req.annotation_ref && !annotation) throw new DomainError(400, 'annotation_ref is not allowed for non-annotation feedback')
  for (const k of ['runnable_ref', 'call_ref', 'trigger_ref'] as const)
    if (req[k] && !runnable) throw new DomainError(400, `${k} is not allowed for non-runnable feedback`)
}

/**
 * Weave's feedback rules (docs/feedback.md): the payload to store, or a 400 saying what is wrong. What
 * needs the catalog (an annotation's spec) is checked after, by the store.
 */
export function checkFeedback(req: FeedbackCreateReq): Record<string, unknown> {
  const type = req.feedback_type
  if (Buffer.byteLength(JSON.stringify(req.payload)) > MAX_PAYLOAD_BYTES) throw new DomainError(400, 'Feedback payload too large')
  const annotation = type.startsWith(ANNOTATION)
  const runnable = type.startsWith(RUNNABLE)
  checkRefsAllowed(req, annotation, runnable)
  if (annotation) checkAnnotation(req, type.slice(ANNOTATION.length))
  if (runnable) checkRunnable(req, type.slice(RUNNABLE.length))
  if (type === NOTE) checkNote(req.payload)
  return type === REACTION ? reactionPayload(req.payload) : req.payload
}
