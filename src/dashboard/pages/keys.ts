/** The API keys page: GET /dashboard/keys (list), POST /dashboard/keys (create), /dashboard/keys/revoke. */
import { StoreError } from '../../store/index.js';
import { htmlReply, redirect } from '../replies.js';
import { keysPage } from '../views/keys.js';
import type { DashboardKit } from './kit.js';

export function mountKeys(kit: DashboardKit): void {
  const { store, viewerOf } = kit;

  kit.page('/dashboard/keys', async (pr, signedIn) =>
    htmlReply(200, keysPage({ viewer: viewerOf(signedIn), keys: await store.keys.list(signedIn.account.id), message: kit.noticeOf(pr) })),
  );

  kit.action('/dashboard/keys', [], async (_pr, signedIn) => {
    let created: { key: string };
    try {
      created = await store.keys.create(signedIn.account.id);
    } catch (err) {
      if (!(err instanceof StoreError) || err.code !== 'key_limit') throw err;
      const keys = await store.keys.list(signedIn.account.id);
      const active = keys.filter((k) => !k.revoked).length;
      const text = `This account already has ${active} active API keys, the most it may have. Revoke one you no longer use, then create a new one.`;
      return htmlReply(409, keysPage({ viewer: viewerOf(signedIn), keys, message: { kind: 'error', text } }));
    }
    return htmlReply(200, keysPage({ viewer: viewerOf(signedIn), keys: await store.keys.list(signedIn.account.id), newKey: created.key }));
  });

  kit.action('/dashboard/keys/revoke', ['key_id'], async (_pr, signedIn, form) => {
    const id = Number(form.get('key_id'));
    const revoked = Number.isSafeInteger(id) && id > 0 ? await store.keys.revoke(id, { accountId: signedIn.account.id }) : null;
    if (!revoked) {
      const keys = await store.keys.list(signedIn.account.id);
      return htmlReply(404, keysPage({ viewer: viewerOf(signedIn), keys, message: { kind: 'error', text: 'No such key on this account.' } }));
    }
    return redirect('/dashboard/keys?done=key-revoked');
  });
}
