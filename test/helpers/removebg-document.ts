/**
 * The responses of remove.bg's published OpenAPI document, as the API it describes answers them:
 * transcribed from `APIs/remove.bg/1.0.0/openapi.yaml` of the public APIs-guru/openapi-directory
 * repository (its origin: https://www.remove.bg/api/swagger.yaml), the paths under its server
 * https://api.remove.bg/v1.0. Only what describes answers (statuses, headers, media types, bodies) is
 * here: what test/helpers/http-openapi.ts checks a response against.
 */
import type { OpenApiDocument } from './http-openapi.js';

const errors = (withCode: boolean) => ({
  type: 'object',
  properties: {
    errors: {
      type: 'array',
      items: {
        type: 'object',
        properties: withCode ? { code: { type: 'string' }, detail: { type: 'string' }, title: { type: 'string' } } : { title: { type: 'string' } },
      },
    },
  },
});

export const REMOVE_BG_DOCUMENT: OpenApiDocument = {
  paths: {
    '/removebg': {
      post: {
        responses: {
          '200': {
            headers: {
              'X-Credits-Charged': { schema: { type: 'number' } },
              'X-Height': { schema: { type: 'integer' } },
              'X-Type': {
                schema: { type: 'string', enum: ['person', 'product', 'animal', 'car', 'car_interior', 'car_part', 'transportation', 'graphics', 'other'] },
              },
              'X-Width': { schema: { type: 'integer' } },
            },
            content: {
              'application/json': { schema: { type: 'object', properties: { data: { type: 'object', properties: { result_b64: { type: 'string' } } } } } },
              'image/*': { schema: { type: 'string' } },
            },
          },
          '400': { content: { '*/*': { schema: errors(true) } } },
          '402': { content: { '*/*': { schema: errors(false) } } },
          '403': { content: { '*/*': { schema: { $ref: '#/components/schemas/AuthFailed' } } } },
          '429': { content: { '*/*': { schema: { $ref: '#/components/schemas/RateLimit' } } } },
        },
      },
    },
    '/account': {
      get: {
        responses: {
          '200': {
            content: {
              '*/*': {
                schema: {
                  type: 'object',
                  properties: {
                    data: {
                      type: 'object',
                      properties: {
                        attributes: {
                          type: 'object',
                          properties: {
                            api: { type: 'object', properties: { free_calls: { type: 'integer' }, sizes: { type: 'string' } } },
                            credits: {
                              type: 'object',
                              properties: {
                                enterprise: { type: 'number' },
                                payg: { type: 'number' },
                                subscription: { type: 'number' },
                                total: { type: 'number' },
                              },
                            },
                          },
                        },
                      },
                    },
                  },
                },
              },
            },
          },
          '403': { content: { '*/*': { schema: { $ref: '#/components/schemas/AuthFailed' } } } },
          '429': { content: { '*/*': { schema: { $ref: '#/components/schemas/RateLimit' } } } },
        },
      },
    },
  },
  components: {
    schemas: {
      AuthFailed: errors(false),
      RateLimit: errors(false),
    },
  },
};
