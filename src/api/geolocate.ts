import { DomainError, validationError } from '../core/errors.js'
import { route, type Ctx, type Reply, type RouteDef } from './route.js'
import type { GeoIndex } from '../geo/index.js'
import { GeolocateQuerySchema, GeolocationResSchema, type GeolocateQuery } from '../schemas/geolocate.js'

/**
 * GET /geolocate. The range integers are written as exact JSON integer literals: IPv6 addresses
 * are 128-bit and a JSON number through JSON.stringify would lose them.
 */
function geolocate(geo: () => Promise<GeoIndex>, deny: ReadonlySet<string>) {
  return async (ctx: Ctx<unknown, GeolocateQuery>): Promise<Reply> => {
    const asked = ctx.query.ip !== undefined
    const ip = ctx.query.ip ?? ctx.clientIp
    const found = (await geo()).lookup(ip)
    if (!found.ok && found.error === 'invalid_ip') {
      if (!asked) throw new DomainError(404, `The client address ${JSON.stringify(ip)} cannot be located`)
      throw validationError([{ loc: ['query', 'ip'], msg: 'Input is not a valid IPv4 or IPv6 address', type: 'ip_any_address' }])
    }
    if (!found.ok) {
      throw new DomainError(404, `No location is known for ${found.ip} (private, reserved or unallocated address)`)
    }
    const { result } = found
    const l = result.location
    const raw =
      `{"ip":${JSON.stringify(result.ip)},"location":{"file_index":${l.file_index},` +
      `"range_start_int":${l.range_start_int.toString()},"range_end_int":${l.range_end_int.toString()},` +
      `"range_start_ip":${JSON.stringify(l.range_start_ip)},"range_end_ip":${JSON.stringify(l.range_end_ip)},` +
      `"country_code":${JSON.stringify(l.country_code)},"country_name":${JSON.stringify(l.country_name)}},` +
      `"allowed":${!deny.has(l.country_code)}}`
    return { raw, contentType: 'application/json' }
  }
}

export function geolocateRoutes(geo: () => Promise<GeoIndex>, denyList: readonly string[]): RouteDef[] {
  return [
    route({
      method: 'GET',
      path: '/geolocate',
      family: 'trace',
      auth: 'none',
      tags: ['Service'],
      summary: 'Country of an IP address (debugging; may be withdrawn)',
      description:
        'Looks the address up in the CC BY 4.0 geo-whois-asn-country ranges shipped with weft. Without `ip`, locates the caller (X-Forwarded-For is believed only from WEFT_TRUSTED_PROXIES).',
      query: GeolocateQuerySchema,
      response: { description: 'Where the address is', schema: GeolocationResSchema },
      handler: geolocate(geo, new Set(denyList)),
    }),
  ]
}
