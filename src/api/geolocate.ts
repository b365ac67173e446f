import { Type } from '@sinclair/typebox'
import { DomainError, validationError } from '../core/errors.js'
import { route, type RouteDef } from './route.js'
import type { GeoIndex } from '../geo/index.js'

const GeolocateQuerySchema = Type.Object({
  ip: Type.Optional(Type.String({ maxLength: 100, description: 'IP address to locate (IPv4 or IPv6); defaults to the client address' })),
})

const GeolocationResSchema = Type.Object({
  ip: Type.String(),
  location: Type.Object({
    file_index: Type.Integer({ description: '0: the IPv4 range file, 1: the IPv6 range file' }),
    range_start_int: Type.Integer({ description: 'First address of the range as an integer (exact; IPv6 values exceed 2^53)' }),
    range_end_int: Type.Integer({ description: 'Last address of the range as an integer (inclusive)' }),
    range_start_ip: Type.String(),
    range_end_ip: Type.String(),
    country_code: Type.String(),
    country_name: Type.String(),
  }),
  allowed: Type.Boolean({ description: 'false for countries on the deny list' }),
})

/**
 * GET /geolocate. The range integers are written as exact JSON integer literals: IPv6 addresses
 * are 128-bit and a JSON number through JSON.stringify would lose them.
 */
export function geolocateRoutes(geo: () => Promise<GeoIndex>, denyList: readonly string[]): RouteDef[] {
  const deny = new Set(denyList)
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
      handler: async (ctx) => {
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
      },
    }),
  ]
}
