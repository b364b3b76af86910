// This thread's stack of active recorders: the mutable state behind is_recording() and
// RecordingPause (recorder.h). Only the runtime (execute, Variable::read) and the recorders
// themselves (GradientTape's state, the function tracer) touch it; everything else asks
// is_recording().
#pragma once

#include <cstddef>
#include <vector>

namespace tapeflow {
class Recorder;
}  // namespace tapeflow

namespace tapeflow::internal {

// The active recorders of this thread, innermost last. Tapes are per thread, as in TF.
// Read-only: recorders are added and removed with push_recorder / remove_recorder.
const std::vector<Recorder*>& active_recorders();
// Makes `recorder` active on this thread, innermost.
void push_recorder(Recorder* recorder);
// Makes `recorder` active at `position` (clamped to the stack size): a tape resumed after
// stop_recording() gets its old place back.
void insert_recorder(Recorder* recorder, std::size_t position);
// Removes the innermost occurrence of `recorder`; returns the position it had, -1 if it was not
// active on this thread.
int remove_recorder(const Recorder* recorder);

}  // namespace tapeflow::internal
