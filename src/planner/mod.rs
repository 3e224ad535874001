//! planner (in progress).
