// `npm run images`: builds every image the local stack runs (see catalog.ts) and loads them into the
// stack's real node when one is up.
import { readStack } from '../local-stack/stack.js';
import { loadImage } from '../local-stack/real-node.js';
import { PrerequisiteError } from '../local-stack/install.js';
import { allImages } from './catalog.js';
import { ensureImageArchive, imageNames } from './build.js';

try {
  const node = readStack()?.realNode;
  for (const image of allImages) {
    const archive = await ensureImageArchive(image);
    if (node) loadImage(node, archive, imageNames(image));
    console.log(`${image.ref}\t${archive}`);
  }
  if (node) console.error(`loaded ${allImages.length} images into the real node`);
} catch (err) {
  if (err instanceof PrerequisiteError) {
    console.error(err.message);
    process.exit(1);
  }
  throw err;
}
