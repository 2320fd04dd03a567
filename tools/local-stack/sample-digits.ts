// Requests for the reference model server (deploy/model-server/): scikit-learn's first two 8x8
// digits, a 0 and a 1, as the Open Inference Protocol v2 takes them. The main job prints one as a
// curl; the tests send them through the gateway.

export const sampleDigits = {
  zero: [
    0, 0, 5, 13, 9, 1, 0, 0, 0, 0, 13, 15, 10, 15, 5, 0, 0, 3, 15, 2, 0, 11, 8, 0, 0, 4, 12, 0, 0, 8, 8, 0, 0, 5, 8, 0,
    0, 9, 8, 0, 0, 4, 11, 0, 1, 12, 7, 0, 0, 2, 14, 5, 10, 12, 0, 0, 0, 0, 6, 13, 10, 0, 0, 0,
  ],
  one: [
    0, 0, 0, 12, 13, 5, 0, 0, 0, 0, 0, 11, 16, 9, 0, 0, 0, 0, 3, 15, 16, 6, 0, 0, 0, 7, 15, 16, 16, 2, 0, 0, 0, 0, 1,
    16, 16, 3, 0, 0, 0, 0, 1, 16, 16, 6, 0, 0, 0, 0, 1, 16, 16, 6, 0, 0, 0, 0, 0, 11, 16, 10, 0, 0,
  ],
};

/** An inference request for the given 64-pixel images; the model answers one label for each. */
export function digitsRequest(images: number[][]) {
  return { inputs: [{ name: 'image', shape: [images.length, 64], datatype: 'FP64', data: images.flat() }] };
}
