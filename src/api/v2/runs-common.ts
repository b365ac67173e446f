import { pathProject, type Ctx, type Reply } from '../route.js'
import type { Scope } from '../../calls/evals/shared.js'

/** What the evaluation-run, prediction and score routes share. */
export const V2 = '/v2/{entity}/{project}'
export const v2Route = { family: 'trace', auth: 'key', project: pathProject } as const

export const scopeOf = (ctx: Ctx): Scope => ({ project: pathProject(ctx), userId: ctx.principal?.userId ?? 'anonymous' })

/** A listing as JSON lines, pulled a chunk of calls at a time. */
export function jsonl<T>(chunks: AsyncGenerator<T[]>): Reply {
  async function* lines() {
    for await (const items of chunks) if (items.length) yield items.map((i) => JSON.stringify(i) + '\n').join('')
  }
  return { contentType: 'application/jsonl', stream: lines() }
}
