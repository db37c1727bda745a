//! Element order, as upstream's own tests expect it: patch order against live order, new
//! elements among live ones, freed slots, server-only elements, duplicates, nulls.

use super::*;

fn items(live: Value, patch: Value) -> Value {
    let schema = PatchSchema::from_entries([
        ("items", FieldStrategy::by("name")),
        ("ints", FieldStrategy::MergeScalars),
    ]);
    strategic_merge_patch(live, patch, &schema).unwrap()
}

#[test]
fn patch_order_should_win_over_live_order_for_patched_elements() {
    let out = items(
        json!({"items": [{"name": "a"}, {"name": "b", "v": 1}, {"name": "c"}]}),
        json!({"items": [{"name": "c", "v": 3}, {"name": "a", "v": 2}]}),
    );
    assert_eq!(
        out["items"],
        json!([{"name": "b", "v": 1}, {"name": "c", "v": 3}, {"name": "a", "v": 2}])
    );
    let out = items(json!({"ints": [1, 2, 3]}), json!({"ints": [3, 1]}));
    assert_eq!(out["ints"], json!([2, 3, 1]));
}

#[test]
fn element_order_should_place_new_elements_among_live_ones() {
    let out = items(
        json!({"items": [{"name": "a", "x": 1}, {"name": "b", "x": 2}]}),
        json!({
            "$setElementOrder/items": [{"name": "d"}, {"name": "a"}, {"name": "b"}, {"name": "c"}],
            "items": [{"name": "d", "v": 4}, {"name": "c", "v": 3}]
        }),
    );
    assert_eq!(names(&out["items"]), ["d", "a", "b", "c"]);
}

#[test]
fn element_order_naming_absent_elements_should_be_ignored_for_them() {
    let out = items(
        json!({"items": [{"name": "a"}, {"name": "c"}]}),
        json!({
            "$setElementOrder/items": [{"name": "c"}, {"name": "b"}, {"name": "a"}],
            "items": [{"name": "c", "v": 3}, {"name": "a", "v": 1}]
        }),
    );
    assert_eq!(
        out["items"],
        json!([{"name": "c", "v": 3}, {"name": "a", "v": 1}])
    );
}

#[test]
fn deleting_and_adding_should_put_new_elements_into_freed_slots_like_upstream() {
    // Upstream's order reference is the live list's array after its in-place deletes and
    // appends (see `order::live_order_after_merge`).
    let out = items(
        json!({"items": [{"name": "a"}, {"name": "b", "x": 1}, {"name": "d", "x": 2}]}),
        json!({
            "$setElementOrder/items": [{"name": "b"}, {"name": "c"}],
            "items": [{"name": "c"}, {"$patch": "delete", "name": "a"}]
        }),
    );
    assert_eq!(names(&out["items"]), ["b", "d", "c"]);
    let out = items(
        json!({"items": [{"name": "a"}, {"name": "d", "x": 2}]}),
        json!({
            "$setElementOrder/items": [{"name": "b"}, {"name": "c"}],
            "items": [{"name": "b"}, {"name": "c"}, {"$patch": "delete", "name": "a"}]
        }),
    );
    assert_eq!(names(&out["items"]), ["d", "b", "c"]);
    let out = items(
        json!({"items": [{"name": "c", "x": 1}]}),
        json!({
            "$setElementOrder/items": [{"name": "b"}],
            "items": [{"name": "b"}, {"$patch": "delete", "name": "a"}]
        }),
    );
    assert_eq!(names(&out["items"]), ["b", "c"]);
}

#[test]
fn element_order_should_keep_server_only_elements_after_their_live_predecessor() {
    let live = json!({"items": [
        {"name": "a"}, {"name": "b"}, {"name": "x"}, {"name": "y"}, {"name": "c"}, {"name": "d"}
    ]});
    let order = json!({"$setElementOrder/items": [{"name": "b"}, {"name": "a"}, {"name": "d"}, {"name": "c"}]});
    assert_eq!(
        names(&items(live, order)["items"]),
        ["b", "a", "x", "y", "d", "c"]
    );
}

#[test]
fn element_order_with_duplicate_keys_should_group_duplicates_at_the_first_position() {
    let live = json!({"items": [
        {"name": "a"}, {"name": "b", "v": 1}, {"name": "c"}, {"name": "b", "v": 2}
    ]});
    let order = json!({"$setElementOrder/items": [{"name": "b"}, {"name": "a"}, {"name": "c"}, {"name": "b"}]});
    assert_eq!(
        items(live, order)["items"],
        json!([{"name": "b", "v": 1}, {"name": "b", "v": 2}, {"name": "a"}, {"name": "c"}])
    );
}

#[test]
fn nulls_in_new_values_should_go_from_objects_but_stay_in_lists() {
    let out = items(
        json!({}),
        json!({"x": [{"inner": {"a": "1", "b": null}}], "y": ["k1", null, "k2"], "z": {"n": null}}),
    );
    assert_eq!(
        out,
        json!({"x": [{"inner": {"a": "1"}}], "y": ["k1", null, "k2"], "z": {}})
    );
}

#[test]
fn element_order_and_deletions_on_scalars_should_keep_server_only_values_last() {
    let out = items(
        json!({"ints": [1, 2, 3, 4]}),
        json!({"$setElementOrder/ints": [1, 2], "$deleteFromPrimitiveList/ints": [3]}),
    );
    assert_eq!(out["ints"], json!([1, 2, 4]));
}
