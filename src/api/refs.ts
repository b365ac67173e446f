import { route, type Ctx, type Reply, type RouteDef } from './route.js'
import type { RefResolver } from '../catalog/refs.js'
import { canAccess } from '../core/principal.js'
import { RefsReadBatchReqSchema, RefsReadBatchResSchema, type RefsReadBatchReq } from '../schemas/refs.js'

/** Each ref names its own project, so the entity check is per ref (in the resolver), not the route's `project`. */
function readBatch(refs: RefResolver) {
  return async (ctx: Ctx<RefsReadBatchReq>): Promise<Reply> => {
    const p = ctx.principal
    const vals = await refs.readBatch(ctx.body.refs, (entity) => !p || canAccess(p, entity))
    return { body: { vals } }
  }
}

/** Reading values by ref (docs/refs.md). */
export function refRoutes(refs: RefResolver): RouteDef[] {
  return [
    route({
      family: 'trace',
      auth: 'key',
      tags: ['Refs'],
      method: 'POST',
      path: '/refs/read_batch',
      summary: 'Read values by ref: object versions, paths into them, table rows through them',
      body: RefsReadBatchReqSchema,
      response: { description: 'One value per ref, in order', schema: RefsReadBatchResSchema },
      handler: readBatch(refs),
    }),
  ]
}
