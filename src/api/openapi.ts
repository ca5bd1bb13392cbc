/** The OpenAPI 3.1 description of the service, served at GET /api/v1/openapi.json. */

import { HTTP_STATUS, type HttpErrorCode } from '../http/errors.js';
import { CHANNELS, FORMATS, SIZES } from '../lib/options.js';

const ERROR_CODES = Object.keys(HTTP_STATUS) as HttpErrorCode[];

function errorResponse(description: string, codes: HttpErrorCode[], extraHeaders: Record<string, unknown> = {}) {
  return {
    description: `${description} Codes: ${codes.join(', ')}.`,
    headers: { 'X-Request-ID': { $ref: '#/components/headers/RequestId' }, ...extraHeaders },
    content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
  };
}

export function openApiDocument(): Record<string, unknown> {
  const rateHeaders = {
    'X-RateLimit-Limit': { schema: { type: 'integer' }, description: 'Requests per minute of the plan.' },
    'X-RateLimit-Remaining': { schema: { type: 'integer' } },
    'X-RateLimit-Reset': { schema: { type: 'integer' }, description: 'Epoch seconds when the window resets.' },
  };
  const retryAfter = { 'Retry-After': { schema: { type: 'integer' }, description: 'Seconds to wait before retrying.' } };
  return {
    openapi: '3.1.0',
    info: { title: 'bgone', version: '1.0.0', description: 'Background removal: upload a photo, get the cut-out back in the same response.' },
    servers: [{ url: '/' }],
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'API key rb-sk_...' } },
      headers: { RequestId: { schema: { type: 'string', pattern: '^req_[0-9a-f]+$' }, description: 'Support trace identifier.' } },
      schemas: {
        Error: {
          type: 'object',
          required: ['code', 'message', 'request_id'],
          additionalProperties: false,
          properties: {
            code: { type: 'string', enum: ERROR_CODES },
            message: { type: 'string' },
            details: { type: 'object' },
            request_id: { type: 'string', pattern: '^req_[0-9a-f]+$' },
          },
        },
        RemoveRequest: {
          type: 'object',
          required: ['image_file'],
          additionalProperties: false,
          properties: {
            image_file: { type: 'string', contentMediaType: 'application/octet-stream', description: 'JPG, PNG or WebP; at most 20 MB and 6000 px per side.' },
            format: { type: 'string', enum: [...FORMATS], default: 'png' },
            channels: { type: 'string', enum: [...CHANNELS], default: 'rgba' },
            bg_color: { type: 'string', description: '#RGB, #RRGGBB, #RRGGBBAA (with or without #), rgb(r, g, b) or a CSS colour name.' },
            size: { type: 'string', enum: [...SIZES], default: 'full' },
            crop: { type: 'string', pattern: '^(true|false|[0-9]+:[0-9]+)$', default: 'false' },
            padding: { type: 'string', pattern: '^([0-9]+(\\.[0-9]+)?%|0?\\.[0-9]+|0|1)$', description: 'Default 10% when crop is set.' },
          },
        },
      },
    },
    security: [{ bearer: [] }],
    paths: {
      '/api/v1/remove': {
        post: {
          operationId: 'removeBackground',
          summary: 'Remove the background of an image',
          parameters: [
            {
              name: 'Idempotency-Key',
              in: 'header',
              required: false,
              schema: { type: 'string', maxLength: 255 },
              description: 'A retry with the same key and image is not charged twice.',
            },
          ],
          requestBody: { required: true, content: { 'multipart/form-data': { schema: { $ref: '#/components/schemas/RemoveRequest' } } } },
          responses: {
            '200': {
              description: 'The processed image.',
              headers: {
                'X-Request-ID': { $ref: '#/components/headers/RequestId' },
                'X-Processing-Time-Ms': { schema: { type: 'integer' } },
                'X-Image-Width': { schema: { type: 'integer' } },
                'X-Image-Height': { schema: { type: 'integer' } },
                'X-Credits-Charged': { schema: { type: 'integer', enum: [0, 1] } },
                'X-Credits-Remaining': { schema: { type: 'integer' } },
                ...rateHeaders,
              },
              content: {
                'image/png': { schema: { type: 'string', contentMediaType: 'image/png' } },
                'image/jpeg': { schema: { type: 'string', contentMediaType: 'image/jpeg' } },
                'image/webp': { schema: { type: 'string', contentMediaType: 'image/webp' } },
              },
            },
            '400': errorResponse('Bad request.', ['missing_image', 'validation_error', 'image_too_large'], rateHeaders),
            '401': errorResponse('Missing or invalid API key.', ['authentication_error']),
            '402': errorResponse('No credits left in the billing cycle.', ['payment_required'], rateHeaders),
            '403': errorResponse('Account disabled.', ['permission_denied'], rateHeaders),
            '405': errorResponse('Wrong method.', ['method_not_allowed']),
            '415': errorResponse('Not a JPG, PNG or WebP image.', ['unsupported_media_type'], rateHeaders),
            '422': errorResponse('The image cannot be decoded, or has no subject.', ['invalid_image', 'foreground_not_found'], rateHeaders),
            '429': errorResponse('Rate limit of the plan exceeded.', ['rate_limit_exceeded'], { ...rateHeaders, ...retryAfter }),
            '500': errorResponse('Internal error; not charged.', ['internal_server_error']),
            '503': errorResponse('Server queue full or shutting down.', ['overloaded'], retryAfter),
          },
        },
      },
      '/healthz': { get: { operationId: 'health', security: [], responses: { '200': { description: 'The process is up.' } } } },
      '/readyz': {
        get: {
          operationId: 'ready',
          security: [],
          responses: { '200': { description: 'Ready to serve.' }, '503': { description: 'Draining, or the database does not answer.' } },
        },
      },
      '/metrics': {
        get: { operationId: 'metrics', security: [], responses: { '200': { description: 'Prometheus metrics.', content: { 'text/plain': {} } } } },
      },
      '/api/v1/openapi.json': { get: { operationId: 'openapi', security: [], responses: { '200': { description: 'This document.' } } } },
    },
  };
}
