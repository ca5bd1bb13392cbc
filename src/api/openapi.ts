/** The OpenAPI 3.1 description of the service, served at GET /api/v1/openapi.json. */

import { ERROR_STATUS, ERROR_CODES as LIBRARY_CODES } from '../lib/errors.js';
import { type Carrier, type OptionRow, optionsFor } from '../lib/option-table.js';
import { FORMATS, MEDIA_TYPES } from '../lib/options.js';
import { HTTP_STATUS, type HttpErrorCode } from '../service/errors.js';

const ERROR_CODES = Object.keys(HTTP_STATUS) as HttpErrorCode[];

/** A result's body: one media type per encoded format. */
const resultContent = Object.fromEntries(Object.values(MEDIA_TYPES).map((type) => [type, { schema: { type: 'string', contentMediaType: type } }]));

function errorResponse(description: string, codes: HttpErrorCode[], extraHeaders: Record<string, unknown> = {}) {
  return {
    description: `${description} Codes: ${codes.join(', ')}.`,
    headers: { 'X-Request-ID': { $ref: '#/components/headers/RequestId' }, ...extraHeaders },
    content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
  };
}

/** The schema of a body's options: the option table's rows that `carrier` takes, as text or files. */
function optionProperties(carrier: Carrier, files: boolean): Record<string, unknown> {
  const rows = optionsFor(carrier).filter((row: OptionRow) => files || row.part === 'field');
  return Object.fromEntries(
    rows.map((row) => [
      row.name,
      { ...row.schema, description: `${row.description} ${row.values[0]!.toUpperCase()}${row.values.slice(1)}.`, examples: [row.example] },
    ]),
  );
}

/** The library's codes (an image's and its options' refusals) answered with `status`. */
function imageCodes(status: number): HttpErrorCode[] {
  return LIBRARY_CODES.filter((code) => code !== 'internal_error' && ERROR_STATUS[code] === status) as HttpErrorCode[];
}

export function openApiDocument(): Record<string, unknown> {
  const rateHeaders = {
    'X-RateLimit-Limit': { schema: { type: 'integer' }, description: 'Requests per minute of the plan.' },
    'X-RateLimit-Remaining': { schema: { type: 'integer' } },
    'X-RateLimit-Reset': { schema: { type: 'integer' }, description: 'Epoch seconds when the window resets.' },
  };
  const retryAfter = { 'Retry-After': { schema: { type: 'integer' }, description: 'Seconds to wait before retrying.' } };
  const bearerChallenge = { 'WWW-Authenticate': { schema: { type: 'string', enum: ['Bearer realm="bgone"'] }, description: 'The scheme the API takes.' } };
  const json = (description: string, schema: string, headers: Record<string, unknown>) => ({
    description,
    headers: { 'X-Request-ID': { $ref: '#/components/headers/RequestId' }, ...headers },
    content: { 'application/json': { schema: { $ref: `#/components/schemas/${schema}` } } },
  });
  // The answers every keyed route of the batch and webhook API may give besides its own.
  const keyedErrors = {
    '401': errorResponse('Missing or invalid API key.', ['authentication_error'], bearerChallenge),
    '403': errorResponse('Account disabled.', ['permission_denied'], rateHeaders),
    '404': errorResponse("No such batch, image or endpoint (or another account's).", ['not_found'], rateHeaders),
    '429': errorResponse(
      "Rate limit of the plan exceeded (per key and per account), or the account's requests in progress at their cap.",
      ['rate_limit_exceeded'],
      { ...rateHeaders, ...retryAfter },
    ),
    '500': errorResponse('Internal error; not charged.', ['internal_server_error']),
    '503': errorResponse('Server busy, batch memory full, or shutting down.', ['overloaded'], retryAfter),
  };
  const bodyTimeout = {
    '408': errorResponse('The request body did not arrive within the deadline; the connection is closed, nothing charged.', ['request_timeout'], rateHeaders),
  };
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
          additionalProperties: false,
          description: 'Exactly one of image_file, image_url and image_file_b64; at most one of bg_color, bg_image_file and bg_image_url.',
          properties: optionProperties('form', true),
        },
        RemoveJsonRequest: {
          type: 'object',
          additionalProperties: false,
          description: 'The same options as text: exactly one of image_url and image_file_b64.',
          properties: optionProperties('json', false),
        },
        RemoveJsonAnswer: {
          type: 'object',
          required: ['data', 'request_id'],
          additionalProperties: false,
          properties: {
            data: {
              type: 'object',
              required: ['result_b64', 'width', 'height', 'foreground'],
              additionalProperties: false,
              properties: {
                result_b64: { type: 'string', contentEncoding: 'base64', description: 'The image, as the body would be without Accept: application/json.' },
                width: { type: 'integer' },
                height: { type: 'integer' },
                foreground: {
                  type: 'object',
                  required: ['top', 'left', 'width', 'height'],
                  additionalProperties: false,
                  properties: { top: { type: 'integer' }, left: { type: 'integer' }, width: { type: 'integer' }, height: { type: 'integer' } },
                },
              },
            },
            request_id: { type: 'string', pattern: '^req_[0-9a-f]+$' },
          },
        },
        BatchImage: {
          type: 'object',
          required: ['id', 'filename', 'status'],
          additionalProperties: false,
          properties: {
            id: { type: 'string', pattern: '^img_' },
            filename: { type: 'string' },
            status: { type: 'string', enum: ['queued', 'processing', 'succeeded', 'failed', 'expired'] },
            width: { type: ['integer', 'null'] },
            height: { type: ['integer', 'null'] },
            format: { type: ['string', 'null'], enum: [...FORMATS.filter((f) => f !== 'auto'), null] },
            credits_charged: { type: 'integer', enum: [0, 1] },
            result_url: { type: ['string', 'null'], description: 'Where the result is fetched while it is kept (succeeded only).' },
            expires_at: {
              type: ['string', 'null'],
              format: 'date-time',
              description: 'When the result stops being kept: the result TTL from the moment the image ended (succeeded only).',
            },
            error: {
              type: ['object', 'null'],
              properties: { code: { type: 'string' }, message: { type: 'string' } },
              description: 'Why the image failed: an error code of the contract, or cancelled.',
            },
          },
        },
        Batch: {
          type: 'object',
          required: ['id', 'status', 'created_at', 'expires_at', 'images'],
          additionalProperties: false,
          properties: {
            id: { type: 'string', pattern: '^bat_' },
            status: { type: 'string', enum: ['processing', 'completed'] },
            created_at: { type: 'string', format: 'date-time' },
            expires_at: {
              type: 'string',
              format: 'date-time',
              description: 'When the last result known so far stops being kept: created_at plus the result TTL, or later once an image ends later.',
            },
            options: { type: 'object', description: 'The /remove options applied to every image, as sent.' },
            images: { type: 'array', items: { $ref: '#/components/schemas/BatchImage' } },
          },
        },
        BatchList: {
          type: 'object',
          required: ['data'],
          additionalProperties: false,
          properties: { data: { type: 'array', items: { $ref: '#/components/schemas/Batch' } } },
        },
        BatchRequest: {
          type: 'object',
          required: ['image_file'],
          additionalProperties: false,
          description: '1 to 50 image_file parts (each within the /remove limits, 200 MB in all) and the options applied to every image.',
          properties: {
            image_file: { type: 'array', items: { type: 'string', format: 'binary' } },
            ...optionProperties('batch', true),
          },
        },
        WebhookEndpoint: {
          type: 'object',
          required: ['id', 'url', 'description', 'created_at', 'status'],
          additionalProperties: false,
          properties: {
            id: { type: 'string', pattern: '^wh_' },
            url: { type: 'string' },
            description: { type: 'string' },
            created_at: { type: 'string', format: 'date-time' },
            status: { type: 'string', enum: ['enabled', 'disabled'], description: 'disabled after a delivery got 410 Gone.' },
            disabled_at: { type: ['string', 'null'], format: 'date-time' },
            secret: { type: 'string', pattern: '^whsec_', description: 'Only in the answer of the creation.' },
          },
        },
        WebhookList: {
          type: 'object',
          required: ['data'],
          additionalProperties: false,
          properties: { data: { type: 'array', items: { $ref: '#/components/schemas/WebhookEndpoint' } } },
        },
        Readiness: {
          type: 'object',
          required: ['status', 'http_backend', 'database'],
          additionalProperties: false,
          description: 'GET /readyz. The load figures and inference come with status ready only.',
          properties: {
            status: { type: 'string', enum: ['ready', 'draining', 'database_unreachable'] },
            http_backend: { type: 'string', enum: ['uws', 'node'] },
            database: { type: 'string', enum: ['sqlite', 'postgres'] },
            inference: {
              type: ['object', 'null'],
              required: ['provider', 'device_id', 'device', 'configured', 'skipped', 'available', 'native_concurrency'],
              additionalProperties: false,
              description: 'Where inference runs (null if the native core does not answer).',
              properties: {
                provider: {
                  type: ['string', 'null'],
                  enum: ['cpu', 'cuda', 'tensorrt', 'webgpu', null],
                  description:
                    'The execution provider in use: the one of BGONE_EXECUTION_PROVIDER, or the entry of its fall-back list the model loaded with (null before any model loaded).',
                },
                device_id: { type: ['integer', 'null'], description: 'The GPU index with cuda and tensorrt; null otherwise.' },
                device: {
                  type: ['string', 'null'],
                  description: 'With webgpu: the Vulkan device it runs on, as the Vulkan loader names it; null otherwise.',
                },
                configured: { type: 'string', description: 'BGONE_EXECUTION_PROVIDER, e.g. webgpu,cpu.' },
                skipped: {
                  type: 'array',
                  description: 'The entries of the fall-back list before the one in use, which could not start, with the reason.',
                  items: {
                    type: 'object',
                    required: ['provider', 'reason'],
                    additionalProperties: false,
                    properties: { provider: { type: 'string' }, reason: { type: 'string' } },
                  },
                },
                available: {
                  type: 'array',
                  items: { type: 'string' },
                  description: 'The execution providers the loaded ONNX Runtime was built with; one listed may still lack its libraries.',
                },
                native_concurrency: {
                  type: 'integer',
                  description:
                    'Jobs let inside the native core at once: BGONE_NATIVE_CONCURRENCY, or with 0 (default) 2 on the CPU and one per core (4 to 16) on a GPU.',
                },
              },
            },
            queue: { type: 'integer', description: 'Jobs running or waiting in the native core.' },
            in_flight: { type: 'integer', description: 'Requests admitted.' },
            batch_queue: { type: 'integer', description: 'Batch images waiting on this node.' },
            peer_bytes: {
              type: ['object', 'null'],
              required: ['in', 'out'],
              additionalProperties: false,
              description:
                'Several nodes (BGONE_CLUSTER_SECRET): bytes of batch images and results this node received from and sent to the others; null without.',
              properties: { in: { type: 'integer' }, out: { type: 'integer' } },
            },
            memory: {
              type: ['object', 'null'],
              required: ['budget_mb', 'used_mb', 'waiting'],
              additionalProperties: false,
              properties: { budget_mb: { type: 'integer' }, used_mb: { type: 'integer' }, waiting: { type: 'integer' } },
            },
          },
        },
        NewWebhook: {
          type: 'object',
          required: ['url'],
          additionalProperties: false,
          properties: {
            url: {
              type: 'string',
              maxLength: 2048,
              description:
                'https:// only, without control characters; must not name or resolve to a loopback, private (IPv6 site-local fec0::/10 included), link-local or metadata address, nor to an IPv6 address leading to one (IPv4-mapped or -compatible, NAT64, 6to4, Teredo). A host with a trailing dot is the host without it.',
            },
            description: { type: 'string', maxLength: 200, description: 'One line of text: no control characters (NUL, TAB, CR, LF and the like).' },
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
              description:
                'A retry with the same key, image and options is not charged twice; another image or other options with a used key are 400; a retry while the first request is still in progress is 409 with Retry-After.',
            },
          ],
          requestBody: {
            required: true,
            content: {
              'multipart/form-data': { schema: { $ref: '#/components/schemas/RemoveRequest' } },
              'application/json': { schema: { $ref: '#/components/schemas/RemoveJsonRequest' } },
              'application/x-www-form-urlencoded': { schema: { $ref: '#/components/schemas/RemoveJsonRequest' } },
            },
          },
          responses: {
            '200': {
              description: 'The processed image; with Accept: application/json, JSON holding it in base64.',
              headers: {
                'X-Request-ID': { $ref: '#/components/headers/RequestId' },
                'X-Model': { schema: { type: 'string' }, description: 'The model that ran (the model option, else the default).' },
                'X-Processing-Time-Ms': { schema: { type: 'integer' } },
                'X-Image-Width': { schema: { type: 'integer' } },
                'X-Image-Height': { schema: { type: 'integer' } },
                'X-Foreground-Top': { schema: { type: 'integer' }, description: "The subject's box in the result's pixels." },
                'X-Foreground-Left': { schema: { type: 'integer' } },
                'X-Foreground-Width': { schema: { type: 'integer' } },
                'X-Foreground-Height': { schema: { type: 'integer' } },
                'X-Uncertainty': { description: 'How unsure the model was of its matte, 0 to 1.', schema: { type: 'string', pattern: '^[01]\\.\\d{3}$' } },
                'X-Credits-Charged': { schema: { type: 'integer', enum: [0, 1] } },
                'X-Credits-Remaining': { schema: { type: 'integer' } },
                ...rateHeaders,
              },
              content: {
                ...resultContent,
                'application/json': { schema: { $ref: '#/components/schemas/RemoveJsonAnswer' } },
              },
            },
            '400': errorResponse('Bad request.', imageCodes(400), rateHeaders),
            '401': errorResponse('Missing or invalid API key.', ['authentication_error'], bearerChallenge),
            '402': errorResponse('No credits left in the billing cycle.', ['payment_required'], rateHeaders),
            '403': errorResponse('Account disabled.', ['permission_denied'], rateHeaders),
            '405': errorResponse('Wrong method.', ['method_not_allowed']),
            '409': errorResponse('The first request with this Idempotency-Key is still in progress.', ['idempotency_in_progress'], {
              ...rateHeaders,
              ...retryAfter,
            }),
            '415': errorResponse('Not a JPG, PNG or WebP image.', imageCodes(415), rateHeaders),
            '422': errorResponse('The image cannot be decoded or downloaded, or has no subject.', imageCodes(422), rateHeaders),
            '408': bodyTimeout['408'],
            '429': keyedErrors['429'],
            '500': errorResponse('Internal error; not charged.', ['internal_server_error']),
            '503': errorResponse('Server queue full or shutting down, or this node was unavailable while processing; not charged.', ['overloaded'], retryAfter),
          },
        },
      },
      '/api/v1/batches': {
        post: {
          operationId: 'createBatch',
          summary: 'Submit 1 to 50 images for asynchronous processing; events go to the webhook endpoints',
          requestBody: { required: true, content: { 'multipart/form-data': { schema: { $ref: '#/components/schemas/BatchRequest' } } } },
          responses: {
            '202': json('Accepted: one credit reserved per accepted image.', 'Batch', rateHeaders),
            ...keyedErrors,
            ...bodyTimeout,
            '400': errorResponse('Bad request.', ['missing_image', 'validation_error', 'image_too_large'], rateHeaders),
            '402': errorResponse('The credits left do not cover every accepted image.', ['payment_required'], rateHeaders),
          },
        },
        get: {
          operationId: 'listBatches',
          parameters: [{ name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } }],
          responses: { '200': json("The account's recent batches, newest first.", 'BatchList', rateHeaders), ...keyedErrors },
        },
      },
      '/api/v1/batches/{batch_id}': {
        parameters: [{ name: 'batch_id', in: 'path', required: true, schema: { type: 'string' } }],
        get: { operationId: 'getBatch', responses: { '200': json('The batch.', 'Batch', rateHeaders), ...keyedErrors } },
        delete: {
          operationId: 'deleteBatch',
          responses: { '204': { description: 'Queued images cancelled (not charged), results dropped.', headers: rateHeaders }, ...keyedErrors },
        },
      },
      '/api/v1/batches/{batch_id}/images/{image_id}': {
        parameters: [
          { name: 'batch_id', in: 'path', required: true, schema: { type: 'string' } },
          { name: 'image_id', in: 'path', required: true, schema: { type: 'string' } },
        ],
        get: {
          operationId: 'getBatchResult',
          responses: {
            '200': {
              description: 'The result, with the headers of a /remove success.',
              headers: {
                'X-Request-ID': { $ref: '#/components/headers/RequestId' },
                'X-Image-Width': { schema: { type: 'integer' } },
                'X-Image-Height': { schema: { type: 'integer' } },
                ...rateHeaders,
              },
              content: {
                ...resultContent,
              },
            },
            ...keyedErrors,
            '409': errorResponse('Not processed yet.', ['result_not_ready'], rateHeaders),
            '410': errorResponse('No longer kept.', ['result_expired'], rateHeaders),
          },
        },
      },
      '/api/v1/webhooks': {
        post: {
          operationId: 'createWebhook',
          requestBody: { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/NewWebhook' } } } },
          responses: {
            '201': json('Created; the secret is shown only here.', 'WebhookEndpoint', rateHeaders),
            ...keyedErrors,
            ...bodyTimeout,
            '400': errorResponse('Bad request (URL refused, or 5 endpoints already).', ['validation_error'], rateHeaders),
          },
        },
        get: { operationId: 'listWebhooks', responses: { '200': json('The endpoints, without secrets.', 'WebhookList', rateHeaders), ...keyedErrors } },
      },
      '/api/v1/webhooks/{webhook_id}': {
        parameters: [{ name: 'webhook_id', in: 'path', required: true, schema: { type: 'string' } }],
        delete: { operationId: 'deleteWebhook', responses: { '204': { description: 'Deleted.', headers: rateHeaders }, ...keyedErrors } },
      },
      '/api/v1/webhooks/{webhook_id}/test': {
        parameters: [{ name: 'webhook_id', in: 'path', required: true, schema: { type: 'string' } }],
        post: {
          operationId: 'testWebhook',
          description: "Counts in the account's per-minute rate limit, as the dashboard's test button does: past it 429.",
          responses: { '202': { description: 'A webhook.test event is queued.', headers: rateHeaders, content: { 'application/json': {} } }, ...keyedErrors },
        },
      },
      '/healthz': { get: { operationId: 'health', security: [], responses: { '200': { description: 'The process is up.' } } } },
      '/readyz': {
        get: {
          operationId: 'ready',
          security: [],
          responses: {
            '200': { description: 'Ready to serve.', content: { 'application/json': { schema: { $ref: '#/components/schemas/Readiness' } } } },
            '503': {
              description: 'Draining, or the database does not answer.',
              content: { 'application/json': { schema: { $ref: '#/components/schemas/Readiness' } } },
            },
          },
        },
      },
      '/metrics': {
        get: { operationId: 'metrics', security: [], responses: { '200': { description: 'Prometheus metrics.', content: { 'text/plain': {} } } } },
      },
      '/api/v1/openapi.json': { get: { operationId: 'openapi', security: [], responses: { '200': { description: 'This document.' } } } },
    },
  };
}
