//! Regions.
