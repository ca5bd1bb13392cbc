/**
 * The downloads of a job: image_url and bg_image_url fetched (url-fetch.ts: the address guard, the
 * 20 MB cap, the 10 s deadline), both at once, before the job's checks (prepare-job.ts), which then
 * see bytes as for an upload. A failed download ends the other one.
 */
import { type FetchAllowList, parseFetchAllow } from './address-guard.js';
import { type NormalisedOptions, withSources } from './options.js';
import type { LibrarySettings } from './settings.js';
import { fetchImageUrl, toBgoneError, UrlFetchError } from './url-fetch.js';

export interface DownloadOptions {
  /** Loopback and private addresses allowed (local setups and tests). */
  allowPrivate: boolean;
  /** The operator's allow list: hosts and networks that may be private (settings' fetchAllow). */
  allow?: FetchAllowList | undefined;
  /** Ends the downloads (the client went away). */
  signal?: AbortSignal | undefined;
}

/** Compiled allow lists, by the settings' (frozen) array of entries. */
const compiled = new WeakMap<readonly string[], FetchAllowList | undefined>();

/** The address rules of downloads under `settings`: fetchAllowPrivate and the compiled fetchAllow. */
export function downloadRules(settings: Readonly<LibrarySettings>): Pick<DownloadOptions, 'allowPrivate' | 'allow'> {
  const entries = settings.fetchAllow;
  if (!compiled.has(entries)) {
    const parsed = parseFetchAllow(entries);
    if ('problem' in parsed) throw new Error(`fetchAllow was not validated: ${parsed.problem}`);
    compiled.set(entries, parsed.list);
  }
  return { allowPrivate: settings.fetchAllowPrivate, allow: compiled.get(entries) };
}

/** Whether the options hold a URL still to download. */
export function needsDownload(normalised: NormalisedOptions): boolean {
  return normalised.sources.imageUrl !== undefined || normalised.sources.bgImageUrl !== undefined;
}

/** The options with each URL replaced by its downloaded bytes (imageFile, bgImageFile); throws a BgoneError. */
export async function downloadSources(normalised: NormalisedOptions, options: DownloadOptions): Promise<NormalisedOptions> {
  if (!needsDownload(normalised)) return normalised;
  const { imageUrl, bgImageUrl } = normalised.sources;
  const both = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, both.signal]) : both.signal;
  const fetch = async (url: string | undefined, field: string): Promise<Buffer | undefined> => {
    if (url === undefined) return undefined;
    try {
      return await fetchImageUrl(url, { allowPrivate: options.allowPrivate, allow: options.allow, signal });
    } catch (err) {
      both.abort();
      throw err instanceof UrlFetchError ? toBgoneError(err, field) : err;
    }
  };
  const [image, background] = await Promise.all([fetch(imageUrl, 'image_url'), fetch(bgImageUrl, 'bg_image_url')]);
  return withSources(normalised, {
    ...normalised.sources,
    imageUrl: undefined,
    bgImageUrl: undefined,
    imageFile: image ?? normalised.sources.imageFile,
    bgImageFile: background ?? normalised.sources.bgImageFile,
  });
}
