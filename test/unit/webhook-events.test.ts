/**
 * The event bodies of src/store/webhook-events.ts, byte for byte: their field order is part of what
 * receivers have always been sent and signed (test/http/batches.test.ts checks them end to end).
 */
import { describe, expect, it } from 'vitest';
import { batchCompletedData, eventBody, imageEventData, imageProcessedData, orphanImageData, webhookTestData } from '../../src/store/webhook-events.js';

const image = { batchId: 'bat_1', imageId: 'img_1', filename: 'teddy.jpg', requestId: 'req_1' };
const AT = Date.UTC(2026, 0, 10, 8);

describe('webhook events', () => {
  it('image.processed of a success: the runner fields, then the store fields', () => {
    const result = { width: 284, height: 398, format: 'png', resultUrl: 'http://x/r', expiresAt: new Date(AT + 3600_000) };
    const eventData = imageEventData(image, result);
    expect(eventBody('image.processed', AT, imageProcessedData({ status: 'succeeded', width: 284, height: 398, format: 'png', eventData }, 1))).toBe(
      '{"type":"image.processed","timestamp":"2026-01-10T08:00:00.000Z","data":{"batch_id":"bat_1","image_id":"img_1","filename":"teddy.jpg",' +
        '"request_id":"req_1","width":284,"height":398,"format":"png","result_url":"http://x/r","expires_at":"2026-01-10T09:00:00.000Z",' +
        '"status":"succeeded","credits_charged":1}}',
    );
  });

  it('image.processed of a failure, of an orphan; batch.completed; webhook.test', () => {
    const error = { code: 'invalid_image', message: 'Broken.' };
    expect(JSON.stringify(imageProcessedData({ status: 'failed', error, eventData: imageEventData(image) }, 0))).toBe(
      '{"batch_id":"bat_1","image_id":"img_1","filename":"teddy.jpg","request_id":"req_1","status":"failed","credits_charged":0,' +
        '"error":{"code":"invalid_image","message":"Broken."}}',
    );
    expect(JSON.stringify(orphanImageData({ batch_id: 'bat_1', id: 'img_1', filename: 'teddy.jpg', request_id: 'req_1' }, error))).toBe(
      '{"batch_id":"bat_1","image_id":"img_1","filename":"teddy.jpg","status":"failed","credits_charged":0,' +
        '"error":{"code":"invalid_image","message":"Broken."},"request_id":"req_1"}',
    );
    expect(JSON.stringify(batchCompletedData('bat_1', { succeeded: 2, failed: 1, credits_charged: 2 }))).toBe(
      '{"batch_id":"bat_1","succeeded":2,"failed":1,"credits_charged":2}',
    );
    expect(JSON.stringify(webhookTestData('wh_1'))).toBe('{"endpoint_id":"wh_1","message":"This is a test event from bgone."}');
  });
});
