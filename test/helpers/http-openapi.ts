/**
 * Checks HTTP responses against the service's own OpenAPI document (GET /api/v1/openapi.json): the
 * status is documented for the operation, every documented header is present and of its schema,
 * the Content-Type is a documented media type, and a JSON body matches its schema. A tiny JSON
 * Schema subset is enough for the document: $ref, type, required, properties,
 * additionalProperties: false, enum, pattern, maxLength, items, and a list of types.
 */
import type { HttpResult } from './server.js';

type Schema = Record<string, any>;
export type OpenApiDocument = Record<string, any>;

function resolve(doc: OpenApiDocument, node: Schema): Schema {
  let n = node;
  for (let guard = 0; n && typeof n.$ref === 'string'; guard++) {
    if (guard > 10 || !n.$ref.startsWith('#/')) throw new Error(`unsupported $ref ${n.$ref}`);
    n = n.$ref
      .slice(2)
      .split('/')
      .reduce((o: any, k: string) => o?.[k], doc);
    if (n === undefined) throw new Error(`dangling $ref ${node.$ref}`);
  }
  return n;
}

function typeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

/** Problems of `value` against `schema` (empty when valid). */
export function validateSchema(doc: OpenApiDocument, schemaIn: Schema, value: unknown, at = '$'): string[] {
  const schema = resolve(doc, schemaIn);
  const problems: string[] = [];
  if (schema.type !== undefined) {
    const t = typeOf(value);
    const types: string[] = Array.isArray(schema.type) ? schema.type : [schema.type];
    const ok = types.includes(t) || (types.includes('number') && t === 'integer');
    if (!ok) return [`${at}: expected ${types.join(' | ')}, got ${t}`];
  }
  if (Array.isArray(value) && schema.items) for (const [i, item] of value.entries()) problems.push(...validateSchema(doc, schema.items, item, `${at}[${i}]`));
  if (schema.enum !== undefined && !schema.enum.includes(value)) problems.push(`${at}: ${JSON.stringify(value)} not in enum ${JSON.stringify(schema.enum)}`);
  if (typeof value === 'string') {
    if (schema.pattern !== undefined && !new RegExp(schema.pattern, 'u').test(value))
      problems.push(`${at}: ${JSON.stringify(value)} does not match ${schema.pattern}`);
    if (schema.maxLength !== undefined && value.length > schema.maxLength) problems.push(`${at}: longer than ${schema.maxLength}`);
  }
  if (typeOf(value) === 'object') {
    const obj = value as Record<string, unknown>;
    for (const name of schema.required ?? []) if (!(name in obj)) problems.push(`${at}: missing required property ${name}`);
    const props: Record<string, Schema> = schema.properties ?? {};
    for (const [name, v] of Object.entries(obj)) {
      if (props[name]) problems.push(...validateSchema(doc, props[name], v, `${at}.${name}`));
      else if (schema.additionalProperties === false) problems.push(`${at}: unexpected property ${name}`);
    }
  }
  return problems;
}

/** A header value (always a string on the wire) against the header's schema. */
function validateHeader(doc: OpenApiDocument, name: string, schemaIn: Schema, raw: string): string[] {
  const schema = resolve(doc, schemaIn);
  if (schema.type === 'integer') {
    if (!/^-?\d+$/.test(raw)) return [`header ${name}: ${JSON.stringify(raw)} is not an integer`];
    return validateSchema(doc, { ...schema }, Number(raw), `header ${name}`);
  }
  if (schema.type === 'number') {
    if (!/^-?\d+(?:\.\d+)?$/.test(raw)) return [`header ${name}: ${JSON.stringify(raw)} is not a number`];
    return validateSchema(doc, { ...schema }, Number(raw), `header ${name}`);
  }
  return validateSchema(doc, schema, raw, `header ${name}`);
}

/**
 * Problems of one response to `method path` against the document (empty when it conforms). A
 * response to a path or method the document does not describe (404, 405) must still carry
 * X-Request-ID and an Error body.
 */
export function checkResponse(doc: OpenApiDocument, method: string, path: string, res: HttpResult): string[] {
  const problems: string[] = [];
  const requestId = res.headers.get('x-request-id');
  const idSchema = doc.components?.headers?.RequestId?.schema;
  if (requestId === null) problems.push('no X-Request-ID header');
  else if (idSchema) problems.push(...validateHeader(doc, 'X-Request-ID', idSchema, requestId));
  const contentType = (res.headers.get('content-type') ?? '').split(';')[0]!.trim();

  const operation = doc.paths?.[path]?.[method.toLowerCase()];
  if (!operation) {
    if (contentType !== 'application/json') problems.push(`undocumented ${method} ${path}: Content-Type ${contentType}, expected application/json`);
    else problems.push(...validateSchema(doc, { $ref: '#/components/schemas/Error' }, res.json, 'body'));
    return problems;
  }
  const documented = operation.responses?.[String(res.status)] ?? operation.responses?.default;
  if (!documented)
    return [...problems, `${method} ${path}: status ${res.status} is not documented (documented: ${Object.keys(operation.responses ?? {}).join(', ')})`];
  const response = resolve(doc, documented);
  for (const [name, h] of Object.entries<Schema>(response.headers ?? {})) {
    const header = resolve(doc, h);
    const value = res.headers.get(name);
    if (value === null) problems.push(`${method} ${path} ${res.status}: documented header ${name} missing`);
    else if (header.schema) problems.push(...validateHeader(doc, name, header.schema, value));
  }
  if (response.content) {
    const types = Object.keys(response.content);
    // A documented range (image/*, */*) covers its types, as in OpenAPI.
    const media =
      response.content[contentType] ??
      (contentType.startsWith('text/plain') ? response.content['text/plain'] : undefined) ??
      response.content[`${contentType.split('/')[0]}/*`] ??
      response.content['*/*'];
    if (!media) problems.push(`${method} ${path} ${res.status}: Content-Type ${JSON.stringify(contentType)} not documented (${types.join(', ')})`);
    else if (contentType === 'application/json' && media.schema) problems.push(...validateSchema(doc, media.schema, res.json, 'body'));
    else if (contentType === 'application/json') problems.push(`${method} ${path} ${res.status}: a JSON body where the document has no schema`);
  }
  return problems;
}
