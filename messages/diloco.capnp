# DiLoCo outer-round messages: a worker's pseudo-gradient report and the group's answer.
# The tensors (pseudo-gradients, or the new global parameters) travel beside the header.
@0xf034bd99830dc5b5;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("swarmrt::wire");
using MicroBatch = import "microbatch.capnp";

enum RoundStatus {
  contribution @0;  # worker -> group: my pseudo-gradient for this round
  applied @1;       # group -> worker: the round is applied, here is theta(t)
  rejected @2;      # group -> worker: not taken (wrong round, already applied, unknown worker)
}

struct RoundHeader {
  roundId @0 :UInt64;
  stage @1 :UInt32;
  fragment @2 :UInt32;      # Streaming DiLoCo fragment; 0 when the whole stage syncs
  contributor @3 :UInt32;   # worker id
  status @4 :RoundStatus;
  step @5 :UInt64;          # inner step at which the round was reported
  reason @6 :Text;          # why a contribution was rejected
  tensorNames @7 :List(Text);
  tensors @8 :List(MicroBatch.TensorMeta);  # one per name: dtype, shape, bytes
  # A contribution that is already the mean of several workers' pseudo-gradients (their
  # all-reduce over a group communicator): every worker in it. Empty: just `contributor`.
  contributors @9 :List(UInt32);
  # Streaming DiLoCo with a quantized encoding: the tensors are theta(t) - theta(t-1) of the
  # fragment in that encoding, not theta(t) (an `applied` round).
  update @10 :Bool;
  # A contribution of the run's last step: an eager group answers it with theta(t) itself
  # (float32), which every worker takes.
  final @11 :Bool;
  # An `applied` round of an eager group: the tensors are the round's mean pseudo-gradient in
  # the run's encoding, and `contributors` names the workers in the mean.
  average @12 :Bool;
  # The end of a synchronous warm-up (diloco.warmup_sync_steps): a contribution's tensors are the
  # worker's theta at that step, every tensor of the stage, which the group starts its rounds
  # from; the group's `applied` answer carries no tensors.
  warmupEnd @13 :Bool;
  # An `applied` round under diloco.all_gather: the tensors are the contributions of
  # `contributors` other than the receiver's own, as they were sent, one after another in that
  # order; the receiver sums them with its own, as the group did.
  gathered @14 :Bool;
  # swarm.compression = auto under diloco.all_gather. A contribution: the top-k density its
  # worker's link to the group carries. A gathered answer: the least of the round's, which the
  # receiver's next contribution takes at most (every contribution crosses every link). 0: none.
  density @15 :Float64;
}
