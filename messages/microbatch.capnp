# Header of one micro-batch hop. The tensors travel beside it: by reference in one process,
# as raw bytes after the header between processes. The header describes them so a receiver
# can check what arrived before trusting it.
@0xce90a225f39c0325;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("swarmrt::wire");

enum Direction {
  forward @0;   # activations (and targets) towards the last stage
  backward @1;  # input gradient back along the recorded route
  eval @2;      # forward only, no autograd state kept
  verify @3;    # a spot check: a stage's input again, to another worker of the stage
  verifyOutput @4;  # that worker's output, to the next-stage worker that holds the original
}

enum DType {
  float32 @0;
  bfloat16 @1;
  float16 @2;
  int64 @3;
  uint8 @4;    # quantized outer gradients (Streaming DiLoCo)
}

struct TensorMeta {
  dtype @0 :DType;
  shape @1 :List(Int64);
  byteSize @2 :UInt64;
}

struct MicroBatchHeader {
  runId @0 :UInt64;
  step @1 :UInt64;
  microBatch @2 :UInt32;
  attempt @3 :UInt32;
  stage @4 :UInt32;          # stage that receives this hop
  direction @5 :Direction;
  route @6 :List(UInt32);    # worker ids visited, stage 0 first
  samples @7 :UInt32;        # sequences in the micro-batch
  tensors @8 :List(TensorMeta);
  pin @9 :List(UInt32);      # re-runs: per stage, the worker that already holds this
                             # micro-batch's gradient (0xFFFFFFFF: none); the hop goes to it
  lossScale @10 :Float64 = 1.0;  # the last stage seeds backward with loss x this (fp16's
                                 # dynamic loss scaler); every stage unscales by it
  hopEncoding @11 :UInt8;        # how tensor 0 is encoded (swarm.hop_encoding, in its order:
                                 # none, bf16, int8, int4); the receiver decodes it
}
