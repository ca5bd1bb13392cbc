/** GET /dashboard/assets/*: the stylesheet and the script, cached for a year (the pages link them with a content hash, assets.ts). */
import { CSS, CSS_PATH, JS, JS_PATH } from '../assets.js';
import type { DashboardKit } from './kit.js';

export function mountAssets(kit: DashboardKit): void {
  for (const [path, body, type] of [
    [CSS_PATH, CSS, 'text/css; charset=utf-8'],
    [JS_PATH, JS, 'text/javascript; charset=utf-8'],
  ] as const) {
    kit.route('GET', path, () => ({
      status: 200,
      headers: { 'Content-Type': type, 'Cache-Control': 'public, max-age=31536000, immutable', 'X-Content-Type-Options': 'nosniff' },
      body,
    }));
  }
}
