//! Topics: submit, edit, delete. Each operation checks its input and
//! limits, commits through the store (which holds the rules' facts), and
//! hands its `Change` to `apply`.

use super::limits::{Action, ClientIp, Who};
use super::{AppResult, AppState, apply::apply, commit, text};
use crate::model::change::{Acted, How};
use crate::model::{Body, Change, CommunityName, Link, Title, Topic, User};
use crate::store::{NewTopic, Store};

/// A topic as a door received it, checked but not yet rendered.
pub struct Submission {
    pub community: CommunityName,
    pub title: Title,
    pub body: Option<Body>,
    pub url: Option<Link>,
    /// The remote `Page`'s id, for a topic that came over federation
    /// (`NewTopic::remote_id`).
    pub remote_id: Option<String>,
}

/// A submitted topic's fields, checked; an empty body or link is none.
pub fn new_topic(
    community: CommunityName,
    title: &str,
    body: Option<&str>,
    url: Option<&str>,
) -> AppResult<Submission> {
    Ok(Submission {
        community,
        title: Title::parse(title)?,
        body: body.filter(|b| !b.trim().is_empty()).map(Body::parse).transpose()?,
        url: url.filter(|u| !u.is_empty()).map(Link::parse).transpose()?,
        remote_id: None,
    })
}

/// Submits a topic: the rate limit, the rendering, the write, the live
/// event.
pub async fn create_topic<S: Store>(
    state: &AppState<S>,
    user: User,
    ip: ClientIp,
    new: Submission,
) -> AppResult<Topic> {
    state.limits.check(Action::Post, ip, Who::User(user.id))?;
    let body = text::render_some(new.body).await?;
    let new = NewTopic { community: new.community, title: new.title, body, url: new.url, remote_id: new.remote_id };
    commit(state, move |st| async move {
        let mut topic = st.store.create_topic(&user, new).await?;
        let notified = std::mem::take(&mut topic.inbox);
        apply(&st, Change::TopicCreated { topic: topic.clone() });
        if !notified.is_empty() {
            apply(&st, Change::Inbox { notified });
        }
        Ok(topic)
    })
    .await
}

/// Sets or clears (`None`) a topic's body, and sets its title when given
/// (only a remote author's `Update` gives one: titles are not edited
/// here, as on Reddit): the rate limit, the rendering, the write.
pub async fn edit_topic<S: Store>(
    state: &AppState<S>,
    user: User,
    ip: ClientIp,
    id: i64,
    body: Option<Body>,
    title: Option<Title>,
) -> AppResult<Topic> {
    state.limits.check(Action::Edit, ip, Who::User(user.id))?;
    let body = text::render_some(body).await?;
    let title = title.map(|t| t.as_str().to_owned());
    commit(state, move |st| async move {
        let topic = st.store.edit_topic(&user, id, body, title).await?;
        apply(&st, Change::TopicChanged { topic_id: id, by: None });
        Ok(topic)
    })
    .await
}

/// Deletes a topic (its author, or an admin).
pub async fn delete_topic<S: Store>(state: &AppState<S>, user: User, id: i64) -> AppResult<()> {
    commit(state, move |st| async move {
        st.store.delete_topic(&user, id).await?;
        apply(&st, Change::TopicChanged { topic_id: id, by: Some(Acted::by(&user, How::Deleted, None)) });
        // The pictures it alone showed go.
        super::media::sweep(&st).await;
        Ok(())
    })
    .await
}
