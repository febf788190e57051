/**
 * Stands in for sharp in the GPU benchmark's bundle (bench/gpu/prepare.sh): the benchmark sends
 * no image, and libvips' native files would not fit in the device call beside Node and ONNX Runtime.
 */
export default function sharp(): never {
  throw new Error("sharp is not carried to the GPU machine: the provider benchmark decodes no image");
}
