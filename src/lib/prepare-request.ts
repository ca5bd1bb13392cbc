/**
 * A request's preparation, the one sequence of every path from options to a job ready to run:
 * removeBackground, POST /api/v1/remove (and its dialects, and the try-it page), a batch and
 * `bgone remove`. In order: the options normalised; the model they name checked (the caller's hook:
 * the service's models allowed); one source of the image; the URLs downloaded, both at once
 * (sources.ts), under the caller's signal; the job's checks (prepare-job.ts). A background's data
 * are decoded by the native core before its model runs (native/pipeline.cc). prepareRequest does it
 * for one image;
 * prepareShared settles the options once for many images (a batch's, the command line's files),
 * each then prepared by its `job`.
 *
 * What differs between the paths are the hooks: the service's model check, the upload place a
 * request holds while it downloads (admission.ts Ticket.downloading), the memory estimator, the
 * signal that ends the downloads (a client gone), and whether the bytes are the caller's own.
 */
import { type NormalisedOptions, normaliseOptions, type RemoveBackgroundOptions } from './options.js';
import { checkBackground, imageSource, type PreparedJob, prepareJob, prepareOwnedJob } from './prepare-job.js';
import { librarySettings } from './settings.js';
import { downloadRules, downloadSources, needsDownload } from './sources.js';

/** What a path adds to the preparation. */
export interface PreparationHooks {
  /** Checks the model the options name (undefined: the default), before anything is downloaded; throws to refuse it. */
  checkModel?: ((model: string | undefined) => void) | undefined;
  /** Called as the downloads start; the function it returns is called once they end, however they end. */
  downloading?: (() => () => void) | undefined;
  /** Ends the downloads (failed_image_download, reason aborted). */
  signal?: AbortSignal | undefined;
  /**
   * The bytes are the caller's own, and nothing transfers or frees them while the job runs (an
   * upload the service read, a file): taken without a copy (prepareOwnedJob).
   */
  owned?: boolean | undefined;
}

/** Options settled once for many images: each image's job from `job`. */
export interface SharedPreparation {
  /** The options, normalised, their URLs downloaded. */
  readonly options: NormalisedOptions;
  /** One image's job; throws the BgoneError removeBackground would. */
  job(input: Uint8Array): PreparedJob;
}

/**
 * Prepares one job: `input` is the image's bytes, or undefined when the options carry it (imageFile,
 * imageUrl, imageFileB64). Rejects with the BgoneError removeBackground would (or what a hook threw).
 */
export async function prepareRequest(
  input: Uint8Array | undefined,
  options: RemoveBackgroundOptions | undefined,
  hooks: PreparationHooks = {},
): Promise<PreparedJob> {
  const normalised = await settle(input, options, hooks, true);
  return (hooks.owned ? prepareOwnedJob : prepareJob)(input, normalised);
}

/**
 * Settles options shared by many images, which come apart (a batch's parts, the command line's
 * files): normalised, the model checked, a background URL downloaded, the background's header
 * checked once for all of them. The options carry no image of their own.
 */
export async function prepareShared(options: RemoveBackgroundOptions | undefined, hooks: PreparationHooks = {}): Promise<SharedPreparation> {
  const normalised = await settle(undefined, options, hooks, false);
  checkBackground(normalised);
  const prepare = hooks.owned ? prepareOwnedJob : prepareJob;
  return { options: normalised, job: (input) => prepare(input, normalised) };
}

/** The options normalised, the model checked, (for one image) its one source, the URLs downloaded. */
async function settle(
  input: Uint8Array | undefined,
  options: RemoveBackgroundOptions | undefined,
  hooks: PreparationHooks,
  oneImage: boolean,
): Promise<NormalisedOptions> {
  const normalised = normaliseOptions(options);
  hooks.checkModel?.(normalised.model);
  if (oneImage) imageSource(input, normalised); // one source, before anything is downloaded
  if (!needsDownload(normalised)) return normalised;
  const done = hooks.downloading?.();
  try {
    return await downloadSources(normalised, { ...downloadRules(librarySettings()), signal: hooks.signal });
  } finally {
    done?.();
  }
}
