/** Names and sizes shared by the fixture generator and the tests (no imports: safe to load first). */

/** The photos the fixtures and tests are built on (test/photos: copies of DEV-set photos, with ground truth). */
export const PHOTOS = {
  /** 284x398, subject well inside the frame, background in all four corners. */
  teddy: 'gc_teddy.jpg',
  /** 513x371, asymmetric subject whose legs touch the bottom edge. */
  llama: 'gc_llama.jpg',
  /** 854x480 (DAVIS 480p). */
  swan: 'davis_blackswan_00025.jpg',
  /** 640x480. */
  book: 'gc_book.jpg',
} as const;

/** Size of the upscaled swan used for the size presets: ~5.0 MP, over the hd budget of 4 MP. */
export const BIG = { width: 2989, height: 1680 };
/** 12 MP, both sides at least twice the model's 1024: the model's input is decoded at 1/2 scale
 * (shrink-on-load) while another thread decodes the full resolution. */
export const TWELVE_MP = { width: 4000, height: 3000 };
/** The largest accepted side, square: 108 MB of decoded RGB, above libvips' 100 MB disc threshold. */
export const HUGE = { width: 6000, height: 6000 };
/** Columns of the llama made transparent in alpha.png (they cross the subject). */
export const ALPHA_BAND = 200;
