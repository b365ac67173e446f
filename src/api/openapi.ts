import type { TSchema } from '@sinclair/typebox'
import type { RouteDef } from './route.js'
import { VERSION } from '../core/version.js'

const VALIDATION_ERROR = {
  type: 'object',
  required: ['detail'],
  properties: {
    detail: {
      type: 'array',
      items: {
        type: 'object',
        required: ['loc', 'msg', 'type'],
        properties: {
          loc: { type: 'array', items: { anyOf: [{ type: 'string' }, { type: 'integer' }] } },
          msg: { type: 'string' },
          type: { type: 'string' },
        },
      },
    },
  },
}
const REASON_ERROR = { type: 'object', required: ['reason'], properties: { reason: { type: 'string' } } }
const OPENAI_ERROR = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['message', 'type', 'code'],
      properties: {
        message: { type: 'string' },
        type: { type: 'string' },
        param: { type: ['string', 'null'] },
        code: { type: 'integer' },
      },
    },
  },
}

function json(schema: unknown, description: string) {
  return { description, content: { 'application/json': { schema } } }
}

/** Drops TypeBox's symbol keys and undefineds: what remains is the plain JSON Schema. */
function plain(schema: TSchema): unknown {
  return JSON.parse(JSON.stringify(schema))
}

function operationId(def: RouteDef): string {
  return (def.method.toLowerCase() + '_' + def.path.replace(/[{}]/g, '').replace(/[^A-Za-z0-9]+/g, '_')).replace(/_+$/, '')
}

/** Path parameters from the pattern's braces, then the query schema's members. */
function parameters(def: RouteDef): unknown[] {
  const params: unknown[] = []
  for (const m of def.path.matchAll(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g)) {
    params.push({ name: m[1], in: 'path', required: true, schema: { type: 'string' } })
  }
  if (def.query) {
    const q = plain(def.query) as { properties?: Record<string, { description?: string }>; required?: string[] }
    for (const [name, schema] of Object.entries(q.properties ?? {})) {
      params.push({
        name,
        in: 'query',
        required: q.required?.includes(name) ?? false,
        schema,
        ...(schema.description ? { description: schema.description } : {}),
        ...(schema && (schema as { type?: string }).type === 'array' ? { style: 'form', explode: true } : {}),
      })
    }
  }
  return params
}

/** The success response, and the errors the route can answer in its family's shape. */
function responses(def: RouteDef): Record<string, unknown> {
  const errShape = def.family === 'openai' ? OPENAI_ERROR : REASON_ERROR
  const out: Record<string, unknown> = {
    '200': def.response
      ? {
          description: def.response.description,
          content: {
            [def.response.contentType ?? 'application/json']: { schema: def.response.schema ? plain(def.response.schema) : {} },
          },
        }
      : json({}, 'Successful Response'),
  }
  if (def.body || def.query) {
    if (def.family === 'openai') out['400'] = json(OPENAI_ERROR, 'Invalid request')
    else out['422'] = json(VALIDATION_ERROR, 'Validation Error')
  }
  if (def.auth !== 'none') {
    out['401'] = json(errShape, 'Missing or invalid API key')
    out['403'] = json(errShape, 'The key may not access this entity, or the operation needs an admin key')
  }
  if (!def.handler) out['501'] = json(errShape, 'Not implemented yet')
  return out
}

function operation(def: RouteDef): Record<string, unknown> {
  const params = parameters(def)
  return {
    tags: def.tags,
    summary: def.summary,
    ...(def.description ? { description: def.description } : {}),
    operationId: operationId(def),
    ...(params.length ? { parameters: params } : {}),
    ...(def.body ? { requestBody: { required: true, content: { 'application/json': { schema: plain(def.body) } } } } : {}),
    responses: responses(def),
    security: def.auth === 'none' ? [] : def.family === 'openai' ? [{ bearerAuth: [] }] : [{ basicAuth: [] }],
  }
}

/** The OpenAPI 3.1 document of every registered route, built from the routes' own schemas. */
export function buildOpenApi(routes: readonly RouteDef[]): unknown {
  const paths: Record<string, Record<string, unknown>> = {}
  for (const def of routes) (paths[def.path] ??= {})[def.method.toLowerCase()] = operation(def)
  return {
    openapi: '3.1.0',
    info: {
      title: 'weft',
      version: VERSION,
      description:
        'Chat completions (OpenAI/vLLM-compatible), Weave-compatible call tracing and statistics, and versioned objects of a project.',
    },
    paths,
    components: {
      securitySchemes: {
        basicAuth: { type: 'http', scheme: 'basic', description: 'Any user name (Weave clients send `api`); the password is the API key.' },
        bearerAuth: { type: 'http', scheme: 'bearer', description: 'The API key as a bearer token.' },
      },
    },
  }
}
