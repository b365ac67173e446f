import type { TSchema } from '@sinclair/typebox'
import { pathProject, route, type Ctx, type Reply, type ResponseDoc, type RouteDef } from '../route.js'
import type { EvalDeps, Scope } from '../../calls/evals/shared.js'
import { NumDeletedSchema } from '../../schemas/common.js'

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

/**
 * What differs between the call-backed kinds' common routes: create, list (JSON lines), delete by
 * ids and read one. The bodies and queries have passed their route's schema, so the domain
 * functions take those schemas' types (`never` here lets each kind name its own).
 */
export interface CallKindRoutes {
  tag: string
  /** The collection, e.g. `${V2}/predictions`. */
  path: string
  /** The path parameter naming one item; the delete query lists ids under its plural (`prediction_ids`). */
  id: string
  create: { summary: string; body: TSchema; response: ResponseDoc; run: (d: EvalDeps, s: Scope, body: never) => Promise<unknown> }
  list: {
    summary: string
    query: TSchema
    item: string
    schema: TSchema
    run: (d: EvalDeps, project: string, q: never) => Promise<AsyncGenerator<unknown[]>>
  }
  remove: { summary: string; query: TSchema; description: string; run: (d: EvalDeps, project: string, ids: string[]) => Promise<unknown> }
  read: { summary: string; response: ResponseDoc; run: (d: EvalDeps, project: string, id: string) => Promise<unknown> }
}

function handlersOf(d: EvalDeps, k: CallKindRoutes) {
  return {
    create: async (ctx: Ctx): Promise<Reply> => ({ body: await k.create.run(d, scopeOf(ctx), ctx.body as never) }),
    list: async (ctx: Ctx): Promise<Reply> => jsonl(await k.list.run(d, pathProject(ctx), ctx.query as never)),
    remove: async (ctx: Ctx): Promise<Reply> => {
      const ids = (ctx.query as Record<string, string[]>)[`${k.id}s`]!
      return { body: await k.remove.run(d, pathProject(ctx), ids) }
    },
    read: async (ctx: Ctx): Promise<Reply> => ({ body: await k.read.run(d, pathProject(ctx), ctx.params[k.id]!) }),
  }
}

/** The four routes, in the order the kind's extra routes (a finish) follow. */
export function callKindRoutes(d: EvalDeps, k: CallKindRoutes): RouteDef[] {
  const h = handlersOf(d, k)
  const common = { ...v2Route, tags: [k.tag] }
  const { create, list, remove, read } = k
  return [
    route({
      ...common,
      method: 'POST',
      path: k.path,
      summary: create.summary,
      body: create.body,
      response: create.response,
      handler: h.create,
    }),
    route({
      ...common,
      method: 'GET',
      path: k.path,
      summary: list.summary,
      query: list.query,
      response: { description: `One ${list.item} per line`, contentType: 'application/jsonl', schema: list.schema },
      handler: h.list,
    }),
    route({
      ...common,
      method: 'DELETE',
      path: k.path,
      summary: remove.summary,
      query: remove.query,
      response: { description: remove.description, schema: NumDeletedSchema },
      handler: h.remove,
    }),
    route({ ...common, method: 'GET', path: `${k.path}/{${k.id}}`, summary: read.summary, response: read.response, handler: h.read }),
  ]
}
