/**
 * The routes nodes call on each other (peer-client.ts), under /internal/v1, mounted only where a
 * cluster secret is configured. Without the secret, every method on them gets the answer of an
 * unknown path (404), as on a node of its own: the public port does not tell that a node is in a
 * cluster. They never look at an API key: an account's key opens no internal route, and the secret
 * opens no public one.
 *
 *   GET    /internal/v1/images/:image/input    a copy of a queued image's bytes, for the node that claimed it
 *   DELETE /internal/v1/images/:image/input    that node has them: this one drops its copy
 *   GET    /internal/v1/images/:image/result   a result this node holds
 *   DELETE /internal/v1/batches/:batch          drops what this node holds of a deleted batch
 */
import type { BatchRunner } from '../batches/batch-runner.js';
import type { Exchange } from '../http/exchange.js';
import type { FallbackAnswers, Router } from '../http/router.js';
import { ApiError } from '../service/errors.js';
import { encodeMeta, INTERNAL_PREFIX, type InputMeta, META_HEADER, PEER_HEADER, type PeerClient, type ResultMeta } from './peer-client.js';
import { CLUSTER_SECRET_HEADER, type ClusterSecrets, isClusterSecret } from './secret.js';

export interface InternalDeps {
  secrets: ClusterSecrets;
  runner: BatchRunner;
  peers: PeerClient;
}

export function mountInternal(router: Router, deps: InternalDeps): void {
  const { runner, peers } = deps;
  const hasSecret = (ex: Exchange) => isClusterSecret(ex.req.header(CLUSTER_SECRET_HEADER), deps.secrets);
  const unknownPath = (ex: Exchange) => ex.error(new ApiError('not_found'));
  const guarded = (handler: (ex: Exchange) => void) => (ex: Exchange) => (hasSecret(ex) ? handler(ex) : unknownPath(ex));
  // On every answer to a caller with the secret: tells it apart from an unknown path (peer-client.ts).
  const peer = { [PEER_HEADER]: '1' };
  // A wrong method is 405 only for a peer that holds the secret.
  const fallback: FallbackAnswers = {
    notFound: unknownPath,
    methodNotAllowed: (ex, allowed) => (hasSecret(ex) ? ex.error(new ApiError('method_not_allowed'), { Allow: allowed.join(', '), ...peer }) : unknownPath(ex)),
  };

  /**
   * A route that hands a peer bytes this node holds for the image in the path, found by `find`,
   * with their metadata in META_HEADER (counted as served), or answers 404 naming `what`.
   */
  const handsHeld = (what: string, find: (imageId: string) => { data: Buffer; meta: InputMeta | ResultMeta } | undefined) =>
    guarded((ex) => {
      const held = find(ex.params.image!);
      if (!held) return ex.error(new ApiError('not_found', `This node does not hold that ${what}.`), peer);
      peers.served(held.data.length);
      ex.send(200, { 'Content-Type': 'application/octet-stream', [META_HEADER]: encodeMeta(held.meta), 'Cache-Control': 'no-store', ...peer }, held.data);
    });

  // A copy: the bytes stay here until the claimer says it has them (DELETE below), or until this
  // node sees in the store that the image is no longer queued or claimed (batch-runner.ts).
  router.get(
    `${INTERNAL_PREFIX}/images/:image/input`,
    handsHeld('image', (imageId) => {
      const image = runner.input(imageId);
      if (!image) return undefined;
      // The batch's background image, if any, follows the image's bytes in the body.
      const background = image.job.background;
      const meta: InputMeta = { options: image.options, imageBytes: image.data.length };
      return { data: background ? Buffer.concat([image.data, background]) : image.data, meta };
    }),
    fallback,
  );

  router.delete(
    `${INTERNAL_PREFIX}/images/:image/input`,
    guarded((ex) => {
      if (!runner.dropHandedOff(ex.params.image!)) return ex.error(new ApiError('not_found', 'This node does not hold that image.'), peer);
      ex.send(204, { 'Cache-Control': 'no-store', ...peer }, '');
    }),
    fallback,
  );

  router.get(
    `${INTERNAL_PREFIX}/images/:image/result`,
    handsHeld('result', (imageId) => {
      const held = runner.result(imageId);
      if (!held) return undefined;
      const meta: ResultMeta = { format: held.format, width: held.width, height: held.height, requestId: held.requestId, expiresAt: held.expiresAt };
      return { data: held.data, meta };
    }),
    fallback,
  );

  router.delete(
    `${INTERNAL_PREFIX}/batches/:batch`,
    guarded((ex) => {
      runner.forget(ex.params.batch!);
      ex.send(204, { 'Cache-Control': 'no-store', ...peer }, '');
    }),
    fallback,
  );
}
